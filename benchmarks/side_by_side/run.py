"""notice-sender side by side with a Powertools (Python) idempotent sender, on one emulator.

Both senders run as Lambda runtimes behind a local Runtime API (lambda_rig.py): the release
`notice-sender` binary, and `python -m awslambdaric app.handler` (the real runtime interface
client) for powertools_sender/app.py. Both talk to the same moto server (emulator.py), each
through its own counting keep-alive proxy, and get the same notices in SQS batches of 25 (the
template's BatchSize; `--batch-size` for another), alternating batch by batch so that noise from other work on the machine hits both alike.

notice-sender is measured as shipped unless told otherwise: NOTICE_RATE_LIMITS unset, so its
built-in rate limits are on, sized from SES `GetAccount` (answered by the proxy with a production
account: emulator.SES_ACCOUNT). `--rate-limits off` measures the alternative NOTICE_RATE_LIMITS=off,
labelled as such in the output and in `--json`. Recipients follow a realistic domain mix
(`--domains mix`, the default) unless `--domains N`. Every run checks from notice-sender's log that
each notice was sent (none rate-limited) and fails if not.

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
from emulator import SES_ACCOUNT, Moto, Proxy, dynamodb_item_bytes  # noqa: E402
from lambda_rig import Function  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LEDGER_TABLE = "notices"
IDEMPOTENCY_TABLE = "idempotency"
FROM = "billing@example.com"
CONFIG_SET = "notice-events"
SECRET = "side-by-side-benchmark-secret"
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:reminders"
# Records per SQS batch: the template's `BatchSize` (25) unless `--batch-size` says otherwise.
BATCH = 25
# The throughput run and the cost model built on it (cost.py) stay at batches of 10, the size
# their published figures were measured and priced at.
THROUGHPUT_BATCH = 10
PYTHON_RATE_LIMIT = 100_000_000
# notice-sender's configurations (--rate-limits): the value of NOTICE_RATE_LIMITS, None = unset.
RATE_LIMITS = {
    "default": None,  # as shipped: built-in limits, the account's from SES GetAccount
    "off": "off",
}
RATE_LIMITS_LABEL = {
    "default": "default (as shipped: NOTICE_RATE_LIMITS unset, built-in limits from SES GetAccount)",
    "off": "off (NOTICE_RATE_LIMITS=off; an alternative, not the shipped configuration)",
}
# --domains mix: 35 % gmail.com, 15 % outlook.com, 10 % yahoo.com; the other 40 % each on a
# domain of its own (the long tail of company and ISP domains).
DOMAIN_MIX = (("gmail.com", 35), ("outlook.com", 15), ("yahoo.com", 10))


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
        # Required by a deployed sender (template.yaml's ManageUrl): the link in every notice.
        "NOTICE_MANAGE_URL": "https://billing.notice-ledger.dev/manage",
    }
    if rate_limits:
        env["NOTICE_RATE_LIMITS"] = rate_limits
    return Function("notice-sender", [args.rust_bin], env, workdir / "notice-sender.log")


def python_function(args, endpoint: str, workdir: Path) -> Function:
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
    if args.powertools_rate_gate:
        env["NOTICE_RATE_LIMIT_PER_MINUTE"] = str(PYTHON_RATE_LIMIT)
    argv = [sys.executable, "-m", "awslambdaric", "app.handler"]
    return Function("notice-sender-powertools", argv, env, workdir / "powertools.log", cwd=HERE / "powertools_sender")


DOMAINS: int | str = "mix"


def recipient(sub: str, i: int, tag: str) -> str:
    """The address of notice `i`: by DOMAIN_MIX (`--domains mix`), else spread over N domains."""
    if DOMAINS == "mix":
        # 37 and 100 are coprime: every 100 consecutive notices take each slot once, so the shares
        # are exact per 100 and each batch of 10 gets 3 or 4 gmail.com, 1 or 2 outlook.com, ...
        slot = (i * 37) % 100
        for domain, share in DOMAIN_MIX:
            if slot < share:
                return f"{sub}@{domain}"
            slot -= share
        return f"{sub}@t{tag.lower()}-{i:06d}.example.com"
    if DOMAINS == 1:
        return f"{sub}@example.com"
    return f"{sub}@d{i % DOMAINS}.example.com"


def domains_label() -> str:
    if DOMAINS == "mix":
        shares = ", ".join(f"{share} % {d}" for d, share in DOMAIN_MIX)
        rest = 100 - sum(share for _, share in DOMAIN_MIX)
        return f"mix: {shares}, {rest} % each on a domain of its own"
    return f"{DOMAINS} domain{'s' if DOMAINS != 1 else ''}"


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
            "email": recipient(sub, i, tag),
            "charge_at": charge_at.isoformat().replace("+00:00", "Z"),
            "jurisdiction": "US-CA",
            "template_data": {"plan_name": "Coffee Box", "amount": {"minor": 2900, "currency": "USD"}},
        }))
    return out


def sqs_event(bodies: list[str], replay_batch: str | None = None) -> dict:
    """An SQS batch as Lambda hands it over; `replay_batch` marks each record as `noticectl replay`
    sends it (its message attribute), which the sender reads before claiming."""
    now_ms = str(int(time.time() * 1000))
    attributes = {} if replay_batch is None else {
        "replay_batch": {"stringValue": replay_batch, "dataType": "String", "stringListValues": [], "binaryListValues": []},
    }
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
        "messageAttributes": attributes,
        "md5OfBody": hashlib.md5(body.encode()).hexdigest(),  # noqa: S324 - SQS's own checksum
        "eventSource": "aws:sqs",
        "eventSourceARN": QUEUE_ARN,
        "awsRegion": "us-east-1",
    } for body in bodies]}


def batches(bodies: list[str], size: int | None = None) -> list[list[str]]:
    size = size or BATCH
    return [bodies[i:i + size] for i in range(0, len(bodies), size)]


def failures(inv) -> list:
    return json.loads(inv.response or b"{}").get("batchItemFailures", [])


def start_rust(args, endpoint: str, workdir: Path) -> Function:
    """Starts notice-sender in the configuration `--rate-limits` names."""
    fn = rust_function(args, endpoint, workdir, RATE_LIMITS[args.rate_limits])
    try:
        fn.start()
    except RuntimeError:
        fn.stop()
        raise
    return fn


def log_records(path: Path, start: int = 0, end: int | None = None) -> list[dict]:
    """notice-sender's JSON log lines between two byte offsets, each as {level, message, fields}."""
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read() if end is None else f.read(max(0, end - start))
    out = []
    for line in data.decode(errors="replace").splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue  # EMF documents are JSON too; anything else is not a log line
        if not isinstance(doc, dict) or "_aws" in doc:
            continue
        fields = doc.get("fields") if isinstance(doc.get("fields"), dict) else doc
        out.append({"level": str(doc.get("level", "")).upper(), "message": fields.get("message", ""), "fields": fields})
    return out


def outcomes(records: list[dict]) -> dict[str, int]:
    """Tally of the `processed` lines' outcome (and queue action, when not `delete`)."""
    tally: dict[str, int] = {}
    for r in records:
        if r["message"] == "processed":
            f = r["fields"]
            key = str(f.get("outcome"))
            if f.get("queue") not in (None, "delete"):
                key += f" (queue: {f.get('queue')})"
            tally[key] = tally.get(key, 0) + 1
    return dict(sorted(tally.items()))


def warnings(records: list[dict]) -> dict[str, int]:
    """WARN and ERROR lines by level and message, with how often each came."""
    tally: dict[str, int] = {}
    for r in records:
        if r["level"] in ("WARN", "WARNING", "ERROR"):
            key = f"{r['level']} {r['message']}"
            tally[key] = tally.get(key, 0) + 1
    return tally


def limits_in_force(records: list[dict]) -> str:
    """What notice-sender said at start about its rate limits and SES's account rate."""
    said: list[str] = []
    for r in records:
        if r["message"] == "processed":
            break  # the first spawn's start-up is over
        f = r["fields"]
        line = None
        if r["message"] == "per-domain send rate":
            line = f"limits: {f.get('limits')}"
        elif "MaxSendRate" in r["message"] or "account rate" in r["message"]:
            line = f"{r['message']} (max_send_rate {f.get('max_send_rate', '-')}{', ' + str(f['error']) if 'error' in f else ''})"
        elif "NOTICE_RATE_LIMITS is off" in r["message"]:
            line = r["message"]
        if line and line not in said:
            said.append(line)
    return "; ".join(said) or "(nothing logged about rate limits)"


def per_notice(counts, n: int, keys_read: int = 0) -> dict[str, float]:
    out = {f"{s}:{op}:{res}": c / n for (s, op, res), c in sorted(counts.items())}
    if keys_read:
        out["dynamodb:BatchGetItem keys read:-"] = keys_read / n
    return out


def call_totals(calls: dict[str, float]) -> dict[str, float]:
    """DynamoDB and SES calls per notice (keys read are not calls)."""
    totals = {"dynamodb": 0.0, "sesv2": 0.0}
    for name, per in calls.items():
        service, op, _ = name.split(":", 2)
        if service in totals and "keys read" not in op:
            totals[service] += per
    return totals


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def side_by_side(args, run: int) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix=f"side-by-side-{run}-"))
    moto = Moto(args.moto_python, ROOT, workdir)
    moto.start()
    # moto's server (werkzeug) closes the connection after every answer; real AWS endpoints keep
    # it open. The fronts keep the senders' connections open, as AWS would, unless --direct; each
    # sender has its own, so each one's AWS calls are counted apart.
    fronts = {} if args.direct else {"rust": Proxy(moto.endpoint), "python": Proxy(moto.endpoint)}
    endpoints = {who: (fronts[who].endpoint if fronts else moto.endpoint) for who in ("rust", "python")}
    try:
        moto.create_ledger_table(LEDGER_TABLE)
        moto.create_idempotency_table(IDEMPOTENCY_TABLE)
        moto.setup_ses(FROM, CONFIG_SET)

        # One unmeasured spawn each first (page cache, as on a warm Lambda host).
        rust = start_rust(args, endpoints["rust"], workdir)
        rust.stop()
        py = python_function(args, endpoints["python"], workdir)
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
        startup_calls = {}
        log0 = {}
        for i, b in enumerate(all_batches):
            if i == args.warmup:
                for who, front in fronts.items():
                    startup_calls[who] = {f"{s}:{op}:{res}": c for (s, op, res), c in sorted(front.counts().items())}
                    front.reset_counts()
                log0 = {k: f.log_path.stat().st_size for k, f in fns.items()}
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
        calls = {who: per_notice(front.counts(), notices, front.keys_read()) for who, front in fronts.items()}
        cpu_per_notice = {k: cpu1[k].minus(cpu0[k]) / notices for k in fns}
        cpu_ticks_per_notice = {k: (cpu1[k].ticks - cpu0[k].ticks) / notices for k in fns}
        for f in fns.values():
            f.stop()
        time.sleep(0.05)  # let the last log lines land
        log = log_records(rust.log_path)
        measured = outcomes(log_records(rust.log_path, log0["rust"]))
        every = outcomes(log)
        sent = moto.sent_count()
        expected = 2 * len(all_batches) * BATCH
        not_sent = {k: v for k, v in every.items() if k != "sent"}
        if bad or sent != expected or not_sent or measured.get("sent") != notices:
            # Deferred (rate-limited) notices are a finding about the shipped limits: reported, never
            # dropped from the measurement.
            raise RuntimeError(
                f"run {run}: batch failures {bad[:3]}, SES accepted {sent} of {expected}; notice-sender outcomes"
                f" {every} (measured batches: {measured}); warnings {warnings(log)}; logs in {workdir}"
            )
        return {
            "run": run,
            "rate_limits": args.rate_limits,
            "notice_rate_limits_env": RATE_LIMITS[args.rate_limits],
            "limits_in_force": limits_in_force(log),
            "domains": domains_label(),
            "powertools_rate_gate": args.powertools_rate_gate,
            "outcomes_measured": measured,
            "rust_warnings": warnings(log),
            "calls_per_notice": calls,
            "calls_per_notice_totals": {who: call_totals(c) for who, c in calls.items()},
            "startup_calls": startup_calls,
            "notices": notices,
            "cold_start_ms": {k: median(v) * 1e3 for k, v in cold.items()},
            "cold_start_all_ms": {k: [round(x * 1e3, 1) for x in v] for k, v in cold.items()},
            "init_cpu_ms": {k: v * 1e3 for k, v in init_cpu.items()},
            "cpu_per_notice_ms": {k: v * 1e3 for k, v in cpu_per_notice.items()},
            "cpu_ticks_per_notice_ms": {k: v * 1e3 for k, v in cpu_ticks_per_notice.items()},
            "batch_wall_ms": {k: median(v) * 1e3 for k, v in walls.items()},
            "peak_rss_mib": {k: v / 1024 for k, v in rss.items()},
            "front": "direct" if not fronts else "keep-alive",
            "workdir": str(workdir),
        }
    finally:
        for front in fronts.values():
            front.close()
        moto.stop()


ROWS = [
    ("cold start (spawn → first /next)", "cold_start_ms", "ms"),
    ("CPU per notice (whole process)", "cpu_per_notice_ms", "ms"),
    ("batch wall (median)", "batch_wall_ms", "ms"),
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
        result["rate_limits"] = args.rate_limits
        result["domains"] = domains_label()
        for who in ("rust", "python"):
            if who == "rust":
                fn = start_rust(args, proxy.endpoint, workdir)
            else:
                fn = python_function(args, proxy.endpoint, workdir)
                fn.start()
            tag = f"tp{who}{uuid.uuid4().hex[:6]}"
            bodies = jobs(tag, args.throughput_batches * THROUGHPUT_BATCH)
            # warm-up: one batch of other notices (connections, caches)
            fn.invoke(sqs_event(jobs(tag + "w", THROUGHPUT_BATCH)))
            scenarios = {}
            cases = [("plain", bodies, False), ("replay", bodies, False)]
            if who == "rust":
                cases.append(("quarantine", jobs(tag + "q", args.throughput_batches * THROUGHPUT_BATCH), True))
            for case, case_bodies, fail in cases:
                proxy.ses_fail = fail
                proxy.reset_counts()
                log0 = fn.log_path.stat().st_size
                cpu0 = fn.cpu()
                walls, failed = [], 0
                t0 = time.perf_counter()
                # The replay case is an operator's replay of the same notices (`noticectl replay`
                # marks each message with its batch); Powertools ignores the attribute.
                replay = "replay-side-by-side" if case == "replay" else None
                for b in batches(case_bodies, THROUGHPUT_BATCH):
                    inv = fn.invoke(sqs_event(b, replay))
                    walls.append(inv.wall)
                    failed += len(failures(inv))
                elapsed = time.perf_counter() - t0
                cpu = fn.cpu().minus(cpu0)
                time.sleep(0.05)  # let the last log lines land
                log_bytes = fn.log_path.stat().st_size - log0
                n = len(case_bodies)
                counts = proxy.counts()
                calls = per_notice(counts, n, proxy.keys_read())
                scenarios[case] = {
                    "notices": n,
                    "notices_per_second": n / elapsed,
                    "batch_wall_ms_median": median(walls) * 1e3,
                    "batch_wall_ms_p90": sorted(walls)[int(0.9 * (len(walls) - 1))] * 1e3,
                    "cpu_per_notice_ms": cpu / n * 1e3,
                    "failed_records": failed,
                    "log_bytes_per_notice": log_bytes / n,
                    "calls_per_notice": calls,
                    "calls_per_notice_totals": call_totals(calls),
                }
                if who == "rust":
                    scenarios[case]["outcomes"] = outcomes(log_records(fn.log_path, log0))
            proxy.ses_fail = False
            scenarios["peak_rss_mib"] = fn.peak_rss_kib() / 1024
            fn.stop()
            if who == "rust":
                log = log_records(fn.log_path)
                result["rust_limits_in_force"] = limits_in_force(log)
                result["rust_warnings"] = warnings(log)
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
    p.add_argument("--batch-size", type=int, default=25,
                   help="records per SQS batch: 25, the template's BatchSize, as shipped; 10 was the harness's size "
                        "before the template took 25 (an alternative, labelled)")
    p.add_argument("--batches", type=int, default=None,
                   help="measured batches per sender per run (default: 400 notices' worth)")
    p.add_argument("--warmup", type=int, default=2, help="unmeasured batches first")
    p.add_argument("--cold-starts", type=int, default=5, help="spawns per sender per run")
    p.add_argument("--rate-limits", choices=sorted(RATE_LIMITS), default="default",
                   help="notice-sender's configuration: default = as shipped (NOTICE_RATE_LIMITS unset: built-in "
                        "limits sized from SES GetAccount); off = NOTICE_RATE_LIMITS=off (an alternative, labelled)")
    p.add_argument("--powertools-rate-gate", action="store_true",
                   help="the Powertools sender also does a conditional counter write per send (default: as "
                        "Powertools documents it, no rate limiting)")
    p.add_argument("--domains", default="mix",
                   help="recipient domains: 'mix' (default: 35 %% gmail.com, 15 %% outlook.com, 10 %% yahoo.com, "
                        "the rest each on its own domain) or a number N (spread evenly over N domains)")
    p.add_argument("--direct", action="store_true",
                   help="senders talk to moto itself, which closes every connection (default: through a keep-alive "
                        "front); only with --rate-limits off (moto does not answer SES GetAccount)")
    p.add_argument("--no-throughput", dest="throughput", action="store_false", help="skip part 2")
    p.add_argument("--throughput-batches", type=int, default=30)
    p.add_argument("--ses-latency-ms", type=float, default=50.0)
    p.add_argument("--skip-side-by-side", action="store_true")
    p.add_argument("--json", help="write every number to this file")
    p.add_argument("--keep-logs", action="store_true", help="keep each run's directory (sender and moto logs)")
    args = p.parse_args()
    global DOMAINS, BATCH
    if not 1 <= args.batch_size <= 100:
        p.error("--batch-size: 1 to 100 (the sender reads a batch's rows in one BatchGetItem of at most 100 keys)")
    BATCH = args.batch_size
    if args.batches is None:
        args.batches = max(1, 400 // BATCH)
    if args.domains == "mix":
        DOMAINS = "mix"
    elif args.domains.isdigit() and int(args.domains) >= 1:
        DOMAINS = int(args.domains)
    else:
        p.error("--domains: 'mix' or a whole number from 1")
    if args.direct and args.rate_limits == "default":
        p.error("--direct needs --rate-limits off: moto does not answer SES GetAccount, so notice-sender would run"
                " on its fallback limits (10/s per domain), not as shipped")
    if not Path(args.rust_bin).is_file():
        print(f"{args.rust_bin} not found: cargo build --release -p notice-sender", file=sys.stderr)
        return 2

    out: dict = {"configuration": {
        "batch_size": BATCH,
        "rate_limits": args.rate_limits,
        "rate_limits_label": RATE_LIMITS_LABEL[args.rate_limits],
        "NOTICE_RATE_LIMITS": RATE_LIMITS[args.rate_limits],
        "domains": domains_label(),
        "powertools_rate_gate": args.powertools_rate_gate,
        "ses_account": SES_ACCOUNT,
    }, "runs": []}
    print(f"notice-sender rate limits: {RATE_LIMITS_LABEL[args.rate_limits]}; recipients: {domains_label()};"
          f" Powertools rate gate: {'on' if args.powertools_rate_gate else 'off (as Powertools documents it)'}")
    if not args.skip_side_by_side:
        for run in range(1, args.runs + 1):
            r = side_by_side(args, run)
            out["runs"].append(r)
            print_table(f"run {run} ({r['notices']} notices per sender in batches of {BATCH}; {r['front']}; notice-sender rate limits:"
                        f" {RATE_LIMITS_LABEL[r['rate_limits']]}; recipients: {r['domains']})", r)
            print(f"  notice-sender at start: {r['limits_in_force']}")
            print(f"  notice-sender outcomes, measured batches: {r['outcomes_measured']}")
            if r["rust_warnings"]:
                print(f"  notice-sender warnings/errors (whole run): {r['rust_warnings']}")
            for who, label in (("rust", "notice-sender"), ("python", "Powertools")):
                if who in r["calls_per_notice"]:
                    t = r["calls_per_notice_totals"][who]
                    detail = ", ".join(f"{per:.3f} {call}" for call, per in r["calls_per_notice"][who].items())
                    print(f"  {label} AWS calls per notice: DynamoDB {t['dynamodb']:.2f}, SES {t['sesv2']:.2f} ({detail})")
            print(f"  cold starts (ms): notice-sender {r['cold_start_all_ms']['rust']}, Powertools {r['cold_start_all_ms']['python']}")
            print(f"  init CPU (until the first poll): notice-sender {r['init_cpu_ms']['rust']:.0f} ms, Powertools {r['init_cpu_ms']['python']:.0f} ms")
            print(f"  CPU per notice from utime+stime ticks: notice-sender {r['cpu_ticks_per_notice_ms']['rust']:.3f} ms, Powertools {r['cpu_ticks_per_notice_ms']['python']:.3f} ms")
        med = {key: {who: median([r[key][who] for r in out["runs"]]) for who in ("rust", "python")} for _, key, _ in ROWS}
        ratio = {key: median([r[key]["rust"] / r[key]["python"] for r in out["runs"]]) for _, key, _ in ROWS}
        out["median"] = med
        out["median_ratio"] = ratio
        print_table(f"median of {len(out['runs'])} runs (ratio column: median of the per-run ratios);"
                    f" notice-sender rate limits: {RATE_LIMITS_LABEL[args.rate_limits]}", med, ratio)
        targets = {"cpu_per_notice_ms": 0.10, "batch_wall_ms": 0.7}
        out["targets"] = {k: {"max_ratio": v, "ratio": ratio[k], "met": ratio[k] <= v} for k, v in targets.items()}
        for key, limit in targets.items():
            verdict = "met" if ratio[key] <= limit else "missed"
            print(f"target ({args.rate_limits} configuration): {key} <= {limit} x Powertools': {verdict} ({ratio[key]:.3f})")

    if args.throughput:
        t = throughput(args)
        out["throughput"] = t
        print(f"\nthroughput, one instance, SES latency {t['ses_latency_ms']:.0f} ms, {t['batches']} batches of {THROUGHPUT_BATCH} back to back;"
              f" notice-sender rate limits: {RATE_LIMITS_LABEL[args.rate_limits]}")
        print(f"  notice-sender at start: {t['rust_limits_in_force']}")
        if t["rust_warnings"]:
            print(f"  notice-sender warnings/errors: {t['rust_warnings']}")
        for who, label in (("rust", "notice-sender"), ("python", "Powertools")):
            for case, s in t[who].items():
                if case == "peak_rss_mib":
                    continue
                print(f"  {label:13} {case:10} {s['notices_per_second']:7.1f} notices/s  batch wall median {s['batch_wall_ms_median']:.1f} ms"
                      f" (p90 {s['batch_wall_ms_p90']:.1f})  CPU {s['cpu_per_notice_ms']:.3f} ms/notice  log {s['log_bytes_per_notice']:.0f} B/notice"
                      f"  failed records {s['failed_records']}" + (f"  outcomes {s['outcomes']}" if "outcomes" in s else ""))
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
