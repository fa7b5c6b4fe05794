#!/usr/bin/env bash
# notice-sender side by side with a Powertools (Python) idempotent sender on one moto emulator:
# cold start, CPU per notice, batch-of-10 wall and peak RSS for both, and their ratios (3 runs and
# their median), then throughput with 50 ms of SES latency and the AWS calls per notice behind
# BENCHMARKS.md's cost table. Method: BENCHMARKS.md, "Side by side with Powertools".
#
# notice-sender is measured as shipped (NOTICE_RATE_LIMITS unset: its rate limits on, sized from
# SES GetAccount, which the emulator's proxy answers with a production account), recipients in a
# realistic domain mix; `--rate-limits off` measures NOTICE_RATE_LIMITS=off instead, labelled.
#
# Builds the release notice-sender, makes benchmarks/.venv (pinned: benchmarks/side_by_side/
# requirements.txt) and runs benchmarks/side_by_side/run.py; extra arguments go to run.py
# (e.g. --runs 1, --batches 100, --no-throughput, --rate-limits off, --domains 1, --json out.json).
# Everything runs on this machine; the only sockets are on 127.0.0.1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

target="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
venv=benchmarks/.venv
requirements=benchmarks/side_by_side/requirements.txt

echo "== release notice-sender (cargo build --release -p notice-sender)"
cargo build --release -p notice-sender

stamp="$venv/.requirements.sha256"
if [[ ! -x "$venv/bin/python" ]] || ! sha256sum --status -c "$stamp" 2>/dev/null; then
    echo "== $venv (pip install -r $requirements)"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet -r "$requirements"
    sha256sum "$requirements" >"$stamp"
fi

echo "== machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), load $(cut -d' ' -f1-3 /proc/loadavg)"
exec "$venv/bin/python" benchmarks/side_by_side/run.py --rust-bin "$target/release/notice-sender" "$@"
