"""notice-sender side by side with a Powertools (Python) idempotent sender, on one emulator.

Both senders run as Lambda runtimes behind a local Runtime API (lambda_rig.py): the release
`notice-sender` binary, and `python -m awslambdaric app.handler` (the real runtime interface
client) for powertools_sender/app.py. Both talk to the same moto server (emulator.py) and get the
same notices in SQS batches of 10, alternating batch by batch so that noise from other work on
the machine hits both alike.

Part 1, side by side (`--runs` times, each with its own emulator and fresh processes; the median
of the runs is printed last):
  cold start      spawn → first `GET /next` (median of `--cold-starts` spawns per sender)
  CPU per notice  utime+stime of the whole process over the measured batches / notices
                  (after `--warmup` batches that open the connections and fill caches)
  batch wall      event handed to the runtime → its response received (median)
  peak RSS        VmHWM at the end
Part 2 (`--throughput`), one sender at a time behind a counting proxy that holds every SES call
for `--ses-latency-ms`: notices/second one instance sustains, back to back, and the AWS calls
per notice for the plain, replay and quarantine cases (the inputs of BENCHMARKS.md's cost table).

scripts/bench-side-by-side.sh builds the binary, makes benchmarks/.venv and runs this.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cost  # noqa: E402
from emulator import Moto, Proxy, dynamodb_item_bytes  # noqa: E402
from lambda_rig import Function  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LEDGER_TABLE = "notices"
IDEMPOTENCY_TABLE = "idempotency"
FROM = "billing@example.com"
CONFIG_SET = "notice-events"
SECRET = "side-by-side-benchmark-secret"
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:reminders"
BATCH = 10
PYTHON_RATE_LIMIT = 100_000_000
# With --rate-gate: a generous shared rate limit, so notice-sender does its rate-gate write per
# send without deferring. The first form is the contract's; the second the older fixed-window one.
RATE_LIMITS = [
    '{"default": {"per_second": 100000, "burst": 100000}}',
    '{"interval_secs": 60, "default_per_interval": 100000000}',
]


def aws_env(endpoint: str) -> dict[str, str]:
    return {
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_SESSION_TOKEN": "test",
        "AWS_ENDPOINT_URL": endpoint,
    }


def rust_function(args, endpoint: str, workdir: Path, rate_limits: str | None) -> Function:
    env = aws_env(endpoint) | {
        "NOTICE_TABLE": LEDGER_TABLE,
        "NOTICE_KEY_SECRET": SECRET,
        "NOTICE_FROM": FROM,
        "NOTICE_CONFIGURATION_SET": CONFIG_SET,
    }
    if rate_limits:
        env["NOTICE_RATE_LIMITS"] = rate_limits
    return Function("notice-sender", [args.rust_bin], env, workdir / "notice-sender.log")


def python_function(args, endpoint: str, workdir: Path, rate_gate: bool) -> Function:
    env = aws_env(endpoint) | {
        "PYTHONPATH": str(HERE / "powertools_sender"),
        "LAMBDA_TASK_ROOT": str(HERE / "powertools_sender"),
        "_HANDLER": "app.handler",
        "PYTHONDONTWRITEBYTECODE": "1",
        "POWERTOOLS_SERVICE_NAME": "notice-sender-powertools",
        "IDEMPOTENCY_TABLE": IDEMPOTENCY_TABLE,
        "NOTICE_KEY_SECRET": SECRET,
        "NOTICE_FROM": FROM,
        "NOTICE_CONFIGURATION_SET": CONFIG_SET,
    }
    if rate_gate:
        env["NOTICE_RATE_LIMIT_PER_MINUTE"] = str(PYTHON_RATE_LIMIT)
    argv = [sys.executable, "-m", "awslambdaric", "app.handler"]
    return Function("notice-sender-powertools", argv, env, workdir / "powertools.log", cwd=HERE / "powertools_sender")


DOMAINS = 1


def jobs(tag: str, count: int) -> list[str]:
    charge_at = (datetime.now(timezone.utc) + timedelta(hours=48)).replace(microsecond=0)
    out = []
    for i in range(count):
        sub = f"sub_{tag}_{i:06d}"
        out.append(json.dumps({
            "subscription_id": sub,
            "period_start": "2026-12-01",
            "kind": "renewal_notice_t72",
            "revision": 0,
            "email": f"{sub}@example.com" if DOMAINS == 1 else f"{sub}@d{i % DOMAINS}.example.com",
            "charge_at": charge_at.isoformat().replace("+00:00", "Z"),
            "jurisdiction": "US-CA",
            "template_data": {"plan_name": "Coffee Box", "amount": "29.00 USD"},
        }))
    return out


def sqs_event(bodies: list[str]) -> dict:
    now_ms = str(int(time.time() * 1000))
    return {"Records": [{
        "messageId": str(uuid.uuid4()),
        "receiptHandle": "AQEB" + uuid.uuid4().hex * 4,
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": now_ms,
            "SenderId": "AIDAIENQZJOLO23YVJ4VO",
            "ApproximateFirstReceiveTimestamp": now_ms,
        },
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(body.encode()).hexdigest(),  # noqa: S324 - SQS's own checksum
        "eventSource": "aws:sqs",
        "eventSourceARN": QUEUE_ARN,
        "awsRegion": "us-east-1",
    } for body in bodies]}


def batches(bodies: list[str]) -> list[list[str]]:
    return [bodies[i:i + BATCH] for i in range(0, len(bodies), BATCH)]


def failures(inv) -> list:
    return json.loads(inv.response or b"{}").get("batchItemFailures", [])


def start_rust(args, endpoint: str, workdir: Path) -> tuple[Function, str | None]:
    """Starts notice-sender with the first NOTICE_RATE_LIMITS form this build accepts."""
    last = None
    # Without --rate-gate: `off` (builds whose gate is on by default), then unset (older builds).
    for limits in (RATE_LIMITS if args.rate_gate else ["off", None]):
        fn = rust_function(args, endpoint, workdir, limits)
        try:
            fn.start()
            return fn, limits
        except RuntimeError as e:
            last = e
            fn.stop()
    raise RuntimeError(f"notice-sender would not start: {last}")


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def side_by_side(args, run: int) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix=f"side-by-side-{run}-"))
    moto = Moto(args.moto_python, ROOT, workdir)
    moto.start()
    # moto's server (werkzeug) closes the connection after every answer; real AWS endpoints keep
    # it open. The front keeps the senders' connections open, as AWS would, unless --direct.
    front = None if args.direct else Proxy(moto.endpoint)
    endpoint = moto.endpoint if front is None else front.endpoint
    try:
        moto.create_ledger_table(LEDGER_TABLE)
        moto.create_idempotency_table(IDEMPOTENCY_TABLE)
        moto.setup_ses(FROM, CONFIG_SET)

        # One unmeasured spawn each first (page cache, as on a warm Lambda host).
        rust, limits = start_rust(args, endpoint, workdir)
        rust.stop()
        py = python_function(args, endpoint, workdir, rate_gate=args.rate_gate)
        py.start()
        py.stop()
        cold = {"rust": [], "python": []}
        # Alternate the spawns; the last spawn of each is the process that runs the batches.
        for i in range(args.cold_starts):
            cold["python"].append(py.start())
            if i < args.cold_starts - 1:
                py.stop()
            cold["rust"].append(rust.start())
            if i < args.cold_starts - 1:
                rust.stop()
        init_cpu = {"rust": rust.init_cpu, "python": py.init_cpu}

        tag = f"{run}{uuid.uuid4().hex[:6]}"
        all_batches = batches(jobs(tag, (args.warmup + args.batches) * BATCH))
        walls = {"rust": [], "python": []}
        fns = {"rust": rust, "python": py}
        bad = []
        cpu0 = {}
        for i, b in enumerate(all_batches):
            if i == args.warmup:
                cpu0 = {k: f.cpu() for k, f in fns.items()}
            order = ["rust", "python"] if i % 2 == 0 else ["python", "rust"]
            for who in order:
                inv = fns[who].invoke(sqs_event(b))
                if failures(inv):
                    bad.append((who, i, failures(inv)))
                if i >= args.warmup:
                    walls[who].append(inv.wall)
        cpu1 = {k: f.cpu() for k, f in fns.items()}
        rss = {k: f.peak_rss_kib() for k, f in fns.items()}
        notices = args.batches * BATCH
        cpu_per_notice = {k: cpu1[k].minus(cpu0[k]) / notices for k in fns}
        cpu_ticks_per_notice = {k: (cpu1[k].ticks - cpu0[k].ticks) / notices for k in fns}
        for f in fns.values():
            f.stop()
        sent = moto.sent_count()
        expected = 2 * len(all_batches) * BATCH
        if bad or sent != expected:
            raise RuntimeError(f"run {run}: batch failures {bad[:3]}, SES accepted {sent} of {expected}; logs in {workdir}")
        return {
            "run": run,
            "rate_limits": limits if args.rate_gate else None,
            "notices": notices,
            "cold_start_ms": {k: median(v) * 1e3 for k, v in cold.items()},
            "cold_start_all_ms": {k: [round(x * 1e3, 1) for x in v] for k, v in cold.items()},
            "init_cpu_ms": {k: v * 1e3 for k, v in init_cpu.items()},
            "cpu_per_notice_ms": {k: v * 1e3 for k, v in cpu_per_notice.items()},
            "cpu_ticks_per_notice_ms": {k: v * 1e3 for k, v in cpu_ticks_per_notice.items()},
            "batch_wall_ms": {k: median(v) * 1e3 for k, v in walls.items()},
            "peak_rss_mib": {k: v / 1024 for k, v in rss.items()},
            "front": "direct" if front is None else "keep-alive",
            "workdir": str(workdir),
        }
    finally:
        if front is not None:
            front.close()
        moto.stop()


ROWS = [
    ("cold start (spawn → first /next)", "cold_start_ms", "ms"),
    ("CPU per notice (whole process)", "cpu_per_notice_ms", "ms"),
    ("batch of 10 wall (median)", "batch_wall_ms", "ms"),
    ("peak RSS (VmHWM)", "peak_rss_mib", "MiB"),
]


def print_table(title: str, r: dict, ratios: dict | None = None) -> None:
    print(f"\n{title}")
    print("| | notice-sender | Powertools (Python) | ratio |")
    print("|---|---|---|---|")
    for label, key, unit in ROWS:
        a, b = r[key]["rust"], r[key]["python"]
        ratio = ratios[key] if ratios else a / b
        print(f"| {label} | {a:.3g} {unit} | {b:.3g} {unit} | {ratio:.3f} |")


def throughput(args) -> dict:
    """One sender at a time, behind the counting proxy with SES latency injected."""
    workdir = Path(tempfile.mkdtemp(prefix="side-by-side-throughput-"))
    moto = Moto(args.moto_python, ROOT, workdir)
    moto.start()
    proxy = Proxy(moto.endpoint, ses_latency=args.ses_latency_ms / 1e3)
    result = {"ses_latency_ms": args.ses_latency_ms, "batches": args.throughput_batches}
    try:
        moto.create_ledger_table(LEDGER_TABLE)
        moto.create_idempotency_table(IDEMPOTENCY_TABLE)
        moto.setup_ses(FROM, CONFIG_SET)
        for who in ("rust", "python"):
            if who == "rust":
                fn, limits = start_rust(args, proxy.endpoint, workdir)
                result["rate_limits"] = limits if args.rate_gate else None
            else:
                fn = python_function(args, proxy.endpoint, workdir, rate_gate=args.rate_gate)
                fn.start()
            tag = f"tp{who}{uuid.uuid4().hex[:6]}"
            bodies = jobs(tag, args.throughput_batches * BATCH)
            # warm-up: one batch of other notices (connections, caches)
            fn.invoke(sqs_event(jobs(tag + "w", BATCH)))
            scenarios = {}
            cases = [("plain", bodies, False), ("replay", bodies, False)]
            if who == "rust":
                cases.append(("quarantine", jobs(tag + "q", args.throughput_batches * BATCH), True))
            for case, case_bodies, fail in cases:
                proxy.ses_fail = fail
                proxy.reset_counts()
                log0 = fn.log_path.stat().st_size
                cpu0 = fn.cpu()
                walls, failed = [], 0
                t0 = time.perf_counter()
                for b in batches(case_bodies):
                    inv = fn.invoke(sqs_event(b))
                    walls.append(inv.wall)
                    failed += len(failures(inv))
                elapsed = time.perf_counter() - t0
                cpu = fn.cpu().minus(cpu0)
                time.sleep(0.05)  # let the last log lines land
                log_bytes = fn.log_path.stat().st_size - log0
                n = len(case_bodies)
                counts = proxy.counts()
                scenarios[case] = {
                    "notices": n,
                    "notices_per_second": n / elapsed,
                    "batch_wall_ms_median": median(walls) * 1e3,
                    "batch_wall_ms_p90": sorted(walls)[int(0.9 * (len(walls) - 1))] * 1e3,
                    "cpu_per_notice_ms": cpu / n * 1e3,
                    "failed_records": failed,
                    "log_bytes_per_notice": log_bytes / n,
                    "calls_per_notice": {f"{s}:{op}:{out}": c / n for (s, op, out), c in sorted(counts.items())},
                }
            proxy.ses_fail = False
            scenarios["peak_rss_mib"] = fn.peak_rss_kib() / 1024
            fn.stop()
            result[who] = scenarios
        rows = moto.scan(LEDGER_TABLE)
        sizes: dict[str, list[int]] = {}
        for item in rows:
            key = item["notice_key"]["S"]
            kind = "rate" if key.startswith("rate#") else item.get("state", {}).get("S", "?")
            sizes.setdefault(kind, []).append(dynamodb_item_bytes(item))
        result["ledger_item_bytes"] = {k: {"count": len(v), "max": max(v), "median": median(v)} for k, v in sizes.items()}
        idem = [dynamodb_item_bytes(i) for i in moto.scan(IDEMPOTENCY_TABLE)]
        result["idempotency_item_bytes"] = {"count": len(idem), "max": max(idem), "median": median(idem)}
        result["workdir"] = str(workdir)
        return result
    finally:
        proxy.close()
        moto.stop()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rust-bin", default=str(ROOT / "target/release/notice-sender"))
    p.add_argument("--moto-python", default=sys.executable, help="a Python with moto[server] (default: this one)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--batches", type=int, default=40, help="measured batches of 10 per sender per run")
    p.add_argument("--warmup", type=int, default=2, help="unmeasured batches first")
    p.add_argument("--cold-starts", type=int, default=5, help="spawns per sender per run")
    p.add_argument("--rate-gate", action="store_true",
                   help="both senders also do a per-domain rate-gate write per send (default: the issue's work only)")
    p.add_argument("--domains", type=int, default=1, help="recipient domains the notices spread over")
    p.add_argument("--direct", action="store_true",
                   help="senders talk to moto itself, which closes every connection (default: through a keep-alive front)")
    p.add_argument("--no-throughput", dest="throughput", action="store_false", help="skip part 2")
    p.add_argument("--throughput-batches", type=int, default=30)
    p.add_argument("--ses-latency-ms", type=float, default=50.0)
    p.add_argument("--skip-side-by-side", action="store_true")
    p.add_argument("--json", help="write every number to this file")
    p.add_argument("--keep-logs", action="store_true", help="keep each run's directory (sender and moto logs)")
    args = p.parse_args()
    global DOMAINS
    DOMAINS = max(1, args.domains)
    if not Path(args.rust_bin).is_file():
        print(f"{args.rust_bin} not found: cargo build --release -p notice-sender", file=sys.stderr)
        return 2

    out: dict = {"runs": []}
    if not args.skip_side_by_side:
        for run in range(1, args.runs + 1):
            r = side_by_side(args, run)
            out["runs"].append(r)
            print_table(f"run {run} ({r['notices']} notices per sender; {r['front']}; rate gate: {r['rate_limits'] or 'off'})", r)
            print(f"  cold starts (ms): notice-sender {r['cold_start_all_ms']['rust']}, Powertools {r['cold_start_all_ms']['python']}")
            print(f"  init CPU (until the first poll): notice-sender {r['init_cpu_ms']['rust']:.0f} ms, Powertools {r['init_cpu_ms']['python']:.0f} ms")
            print(f"  CPU per notice from utime+stime ticks: notice-sender {r['cpu_ticks_per_notice_ms']['rust']:.3f} ms, Powertools {r['cpu_ticks_per_notice_ms']['python']:.3f} ms")
        med = {key: {who: median([r[key][who] for r in out["runs"]]) for who in ("rust", "python")} for _, key, _ in ROWS}
        ratio = {key: median([r[key]["rust"] / r[key]["python"] for r in out["runs"]]) for _, key, _ in ROWS}
        out["median"] = med
        out["median_ratio"] = ratio
        print_table(f"median of {len(out['runs'])} runs (ratio column: median of the per-run ratios)", med, ratio)
        target = ratio["cpu_per_notice_ms"] <= 0.10
        print(f"target: CPU per notice <= 1/10 of Powertools': {'met' if target else 'missed'} ({ratio['cpu_per_notice_ms']:.3f})")

    if args.throughput:
        t = throughput(args)
        out["throughput"] = t
        print(f"\nthroughput, one instance, SES latency {t['ses_latency_ms']:.0f} ms, {t['batches']} batches of 10 back to back")
        for who, label in (("rust", "notice-sender"), ("python", "Powertools")):
            for case, s in t[who].items():
                if case == "peak_rss_mib":
                    continue
                print(f"  {label:13} {case:10} {s['notices_per_second']:7.1f} notices/s  batch wall median {s['batch_wall_ms_median']:.1f} ms"
                      f" (p90 {s['batch_wall_ms_p90']:.1f})  CPU {s['cpu_per_notice_ms']:.3f} ms/notice  log {s['log_bytes_per_notice']:.0f} B/notice"
                      f"  failed records {s['failed_records']}")
                for call, per in s["calls_per_notice"].items():
                    print(f"      {per:6.3f} x {call}")
        print(f"  ledger item bytes: {t['ledger_item_bytes']}")
        print(f"  idempotency item bytes: {t['idempotency_item_bytes']}")
        print()
        print(cost.table(out))

    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str))
    workdirs = [r["workdir"] for r in out["runs"]] + ([out["throughput"]["workdir"]] if "throughput" in out else [])
    if args.keep_logs:
        print("logs: " + " ".join(workdirs))
    else:
        for d in workdirs:
            shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
