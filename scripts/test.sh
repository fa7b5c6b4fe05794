#!/usr/bin/env bash
# The project's single test command: installs the pinned emulator and linter into .venv, lints
# template.yaml, then runs every test in the workspace (extra arguments go to `cargo test`).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ ! -x .venv/bin/python ]]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -r tests/requirements.txt

export MOTO_SERVER="$PWD/.venv/bin/moto_server"

.venv/bin/cfn-lint template.yaml

cargo test --workspace --all-targets "$@"
