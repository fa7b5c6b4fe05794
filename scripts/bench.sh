#!/usr/bin/env bash
# Runs every benchmark once and prints the numbers BENCHMARKS.md reports: machine, release binary
# sizes, send-path CPU and batch wall times (criterion), footprint and ledger calls, sender cold
# start, and the chaos simulation. Release builds with LTO take several minutes on 2 cores.
# Everything runs on this machine; the only sockets are on 127.0.0.1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Absolute: `cargo bench` runs each bench binary from its package's directory.
target="$(realpath -m "${CARGO_TARGET_DIR:-target}")"

echo "== machine"
echo "cores:  $(nproc)"
echo "cpu:    $(lscpu | sed -n 's/^Model name: *//p' | head -n 1)"
echo "memory: $(free -h | awk '/^Mem:/ {print $2}')"
echo "rustc:  $(rustc --version)"

echo
echo "== release binaries, each built by itself as SAM builds it (cargo build --release -p PKG)"
# One package a call: built together, cargo unifies features across them and the sender would
# link the in-process rate buckets (notice_rate's `testing`, which notice-proof's test kit turns
# on) and noticectl's `outbox` — not the binary that ships. The sender is
# built last, so the cold-start bench below runs the shipped binary.
for bin in notice-proof noticectl notice-reporter notice-reconciler notice-sender; do
    cargo build --release -p "$bin"
    if [[ "$bin" != notice-proof ]]; then
        bytes=$(stat -c %s "$target/release/$bin")
        awk -v b="$bin" -v n="$bytes" 'BEGIN { printf "%-18s %6.2f MB  (%d bytes)\n", b, n / 1e6, n }'
    fi
done
sender_bytes=$(stat -c %s "$target/release/notice-sender")
if ((sender_bytes <= 10000000)); then echo "target: notice-sender <= 10 MB: met"; else echo "target: notice-sender <= 10 MB: missed"; fi

echo
echo "== send path (criterion)"
cargo bench -p notice-benches --bench send_path
python3 - "$target/criterion" <<'EOF'
import json, os, sys
root = sys.argv[1]

def mean_ns(path):
    with open(os.path.join(root, path, "new", "estimates.json")) as f:
        e = json.load(f)["mean"]
    return e["point_estimate"], e["confidence_interval"]["lower_bound"], e["confidence_interval"]["upper_bound"]

print("summary (mean, 95% CI):")
for name in ["deliver_new_notice", "deliver_redelivery_suppressed", "parse_and_key", "render"]:
    m, lo, hi = mean_ns(os.path.join("core", name))
    print(f"  core/{name:<32} {m / 1e3:8.2f} us  [{lo / 1e3:.2f} .. {hi / 1e3:.2f}]")
batch = {}
for n in ["1", "10", "1000"]:
    m, lo, hi = mean_ns(os.path.join("batch_50ms_mailer", n))
    batch[n] = m
    print(f"  batch of {n:>4} (50 ms mailer, all concurrent) {m / 1e6:8.2f} ms  [{lo / 1e6:.2f} .. {hi / 1e6:.2f}]")
new = mean_ns(os.path.join("core", "deliver_new_notice"))[0]
print(f"target: core path < 20 us per notice: {'met' if new < 20e3 else 'missed'} ({new / 1e3:.2f} us)")
r10 = batch["10"] / batch["1"]
print(f"target: batch of 10 <= 1.3 x one notice: {'met' if r10 <= 1.3 else 'missed'} ({r10:.3f} x)")
print(f"batch of 1000 / one notice: {batch['1000'] / batch['1']:.3f} x")
EOF

echo
echo "== footprint and ledger calls"
cargo bench -p notice-benches --bench footprint

echo
echo "== notice-sender cold start (spawn -> first Runtime API poll, local stub)"
NOTICE_SENDER_BIN="$target/release/notice-sender" cargo bench -p notice-benches --bench cold_start

echo
echo "== chaos simulation (notice-proof simulate, release)"
/usr/bin/time -f "wall %e s, peak RSS %M KiB" "$target/release/notice-proof" simulate
