#!/usr/bin/env bash
# The project's single test command: installs the pinned emulator and linter into .venv, lints
# template.yaml, then runs every test in the workspace (extra arguments go to `cargo test`).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ ! -x .venv/bin/python ]]; then
    python3 -m venv .venv
fi
# The emulator and linter, and the Python reference producer's pinned boto3 (one resolve).
.venv/bin/python -m pip install -q --disable-pip-version-check -r tests/requirements.txt \
    -r examples/producers/python/requirements.txt

export MOTO_PYTHON="$PWD/.venv/bin/python"

.venv/bin/cfn-lint template.yaml

# System packages the tests need, installed once from Debian when missing: the PostgreSQL server
# (the PostgreSQL ledger tests run a throwaway cluster with initdb/postgres; openssl makes its TLS
# certificate) and Node.js (the key-interop check below).
packages=()
if [[ -z "${PG_BIN:-}" ]] && ! command -v initdb >/dev/null 2>&1 \
    && ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
    packages+=(postgresql)
fi
command -v openssl >/dev/null 2>&1 || packages+=(openssl)
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)
if ((${#packages[@]})); then
    sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    "${sudo[@]}" apt-get update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${packages[@]}"
fi

# Workers in other languages must derive byte-identical notice keys: recompute every published
# vector with Node.js's and Python's own HMAC.
node scripts/key-vectors.mjs
python3 scripts/key_vectors.py
node scripts/link-vectors.mjs
python3 scripts/link_vectors.py

# The Node.js reference producer's pinned SDK (examples/producers/node/package-lock.json), installed
# again only when the lock file changed since the last install.
producer=examples/producers/node
if ! cmp -s "$producer/package-lock.json" "$producer/node_modules/.installed-lock.json"; then
    npm ci --prefix "$producer" --no-audit --no-fund --loglevel=error
    cp "$producer/package-lock.json" "$producer/node_modules/.installed-lock.json"
fi

cargo test --workspace --all-targets --no-fail-fast "$@"
