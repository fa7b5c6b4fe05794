"""Cost per 1 million notices from what the benchmark measured, at AWS list prices.

Inputs measured by run.py: the AWS calls each case makes per notice (counted by the proxy in front
of the emulator), ledger item sizes (scanned after the run), CPU per notice and log bytes per
notice. Everything else is a stated assumption (below), so the table can be recomputed when a
price or an assumption changes.

Lambda duration at 128 MB: Lambda gives a function CPU in proportion to its memory (1,769 MB = one
vCPU), so at 128 MB the process gets 128/1769 of a core and its CPU time stretches by 1769/128.
Billed duration per batch of 10 = the I/O path (calls × their latency; notice-sender runs the ten
records concurrently, the Powertools sender one after another) + CPU per batch ÷ that share. Adding
the two (instead of overlapping them) is conservative for notice-sender.
"""

from __future__ import annotations

import math

# us-east-1 on-demand list prices (no free tier, no savings plans), assumed current on the date
# below. This machine has no network: they were not re-checked here. Verify before quoting.
PRICES_AS_OF = "2026-11-30"
PRICES = {
    "dynamodb_wru": 0.625 / 1e6,  # on-demand write request unit
    "dynamodb_rru": 0.125 / 1e6,  # on-demand read request unit
    "lambda_gb_s_arm64": 0.0000133334,  # template.yaml deploys arm64
    "lambda_gb_s_x86": 0.0000166667,
    "lambda_request": 0.20 / 1e6,
    "ses_email": 0.10 / 1e3,
    "sqs_request": 0.40 / 1e6,  # standard queue, per 64 KB chunk
    "sns_publish": 0.50 / 1e6,
    "logs_gb": 0.50,  # CloudWatch Logs standard ingestion
}

MEMORY_MB = 128
CPU_SHARE = MEMORY_MB / 1769
DYNAMODB_LATENCY_S = 0.008  # assumed in-region DynamoDB round trip
BATCH = 10
EVENTS_PER_SENT = 2  # SES Send + Delivery, through SNS → SQS → notice-reconciler


def wru(size_bytes: float) -> int:
    return max(1, math.ceil(size_bytes / 1024))


def rru_strong(size_bytes: float) -> int:
    return max(1, math.ceil(size_bytes / 4096))


def lambda_seconds(cpu_per_notice_s: float, ddb_calls: float, ses_latency_s: float, concurrent: bool) -> float:
    """Billed seconds per batch of 10 at 128 MB (see the module docstring)."""
    per_record_io = ddb_calls * DYNAMODB_LATENCY_S + ses_latency_s
    io = per_record_io if concurrent else BATCH * per_record_io
    return io + BATCH * cpu_per_notice_s / CPU_SHARE


def rows(m: dict) -> list[tuple[str, str, dict[str, float]]]:
    """(line, unit, {case: dollars per 1M notices}) for notice-sender's three cases and the
    Powertools sender's plain case. `m` holds the measured inputs (see table())."""
    claimed, sent = m["claimed_bytes"], m["sent_bytes"]
    cases = {}
    # Per notice: ledger writes (table + open-claims index), reads, sends, events, messages.
    # plain: claim (PutItem) + index insert, commit (UpdateItem) + index delete; reconciler per
    # event: a strongly consistent GetItem and a conditional PutItem.
    cases["plain"] = dict(
        sender_wru=wru(claimed) * 2 + wru(sent) * 2,
        rate_wru=1,
        recon_wru=EVENTS_PER_SENT * wru(sent),
        recon_rru=EVENTS_PER_SENT * rru_strong(sent),
        emails=1, events=EVENTS_PER_SENT, messages=1, invocations=1 / BATCH,
        lambda_s=m["rust_plain_s"], log_bytes=m["rust_plain_log"],
    )
    # replay-heavy: every notice is also replayed once after it was sent. The replayed message
    # passes the rate gate (it comes before the claim) and its claim fails its condition, which
    # DynamoDB bills as a write of the held row's size. Nothing is sent.
    cases["replay"] = dict(
        sender_wru=cases["plain"]["sender_wru"] + wru(sent),
        rate_wru=2,
        recon_wru=cases["plain"]["recon_wru"], recon_rru=cases["plain"]["recon_rru"],
        emails=1, events=EVENTS_PER_SENT, messages=2, invocations=2 / BATCH,
        lambda_s=m["rust_plain_s"] + m["rust_replay_s"],
        log_bytes=m["rust_plain_log"] + m["rust_replay_log"],
    )
    # quarantine-heavy: every send's outcome is unknown (a 5xx after SES accepted the mail). No
    # commit: the claim stays in the open-claims index until the Send event resolves it (reconciler
    # write + index delete); SES bills the mail it accepted.
    cases["quarantine"] = dict(
        sender_wru=wru(claimed) * 2,
        rate_wru=1,
        recon_wru=EVENTS_PER_SENT * wru(sent) + wru(sent),
        recon_rru=EVENTS_PER_SENT * rru_strong(sent),
        emails=1, events=EVENTS_PER_SENT, messages=1, invocations=1 / BATCH,
        lambda_s=m["rust_quarantine_s"], log_bytes=m["rust_quarantine_log"],
    )
    # The Powertools sender, plain: idempotency record (PutItem) + completion (UpdateItem), no
    # index; the same events, messages and reconciler (it needs one to learn deliveries too).
    cases["powertools plain"] = dict(
        sender_wru=wru(m["idempotency_bytes"]) * 2,
        rate_wru=0,
        recon_wru=cases["plain"]["recon_wru"], recon_rru=cases["plain"]["recon_rru"],
        emails=1, events=EVENTS_PER_SENT, messages=1, invocations=1 / BATCH,
        lambda_s=m["python_plain_s"], log_bytes=m["python_plain_log"],
    )
    p = PRICES
    n = 1e6
    out = []

    def line(name, unit, f):
        out.append((name, unit, {case: f(c) * n for case, c in cases.items()}))

    line("DynamoDB writes: sender (claim, commit, open-claims index)", "WRU", lambda c: c["sender_wru"] * p["dynamodb_wru"])
    line("DynamoDB writes: rate gate (one per admitted send)", "WRU", lambda c: c["rate_wru"] * p["dynamodb_wru"])
    line("DynamoDB: reconciler (read + write per event)", "WRU+RRU",
         lambda c: c["recon_wru"] * p["dynamodb_wru"] + c["recon_rru"] * p["dynamodb_rru"])
    line("Lambda sender: GB-seconds at 128 MB, arm64", "GB-s",
         lambda c: c["lambda_s"] * (MEMORY_MB / 1024) / BATCH * p["lambda_gb_s_arm64"])
    line("Lambda sender: requests", "invocations", lambda c: c["invocations"] * p["lambda_request"])
    line("SQS: jobs (send, receive, delete in batches of 10)", "requests",
         lambda c: c["messages"] * (1 + 2 / BATCH) * p["sqs_request"])
    line("SNS + SQS: SES events to the reconciler", "publishes+requests",
         lambda c: c["events"] * (p["sns_publish"] + (1 + 2 / BATCH) * p["sqs_request"]))
    line("CloudWatch Logs: sender log lines (measured bytes)", "GB", lambda c: c["log_bytes"] / 1e9 * p["logs_gb"])
    line("SES: SendEmail", "emails", lambda c: c["emails"] * p["ses_email"])
    return out


def inputs(out: dict) -> dict | None:
    t = out.get("throughput")
    if not t:
        return None
    ses = t["ses_latency_ms"] / 1e3
    cpu = out.get("median", {}).get("cpu_per_notice_ms")
    rust_cpu = (cpu["rust"] if cpu else t["rust"]["plain"]["cpu_per_notice_ms"]) / 1e3
    py_cpu = (cpu["python"] if cpu else t["python"]["plain"]["cpu_per_notice_ms"]) / 1e3
    # Replay and quarantine CPU relative to plain as measured in the throughput run, scaled by the
    # AWS calls each case makes with the rate gate on (as deployed) over those it made measured:
    # the SDK's per-call cost dominates the sender's CPU (BENCHMARKS.md).
    measured_calls = {"plain": 3, "replay": 1, "quarantine": 2}
    deployed_calls = {"plain": 4, "replay": 2, "quarantine": 3}
    gate = 1 if out.get("throughput", {}).get("rate_limits") else 0

    def scale(case: str) -> float:
        return deployed_calls[case] / (measured_calls[case] + gate)

    def rel(case: str) -> float:
        """CPU per notice of `case` as deployed, relative to plain as deployed."""
        base = t["rust"][case]["cpu_per_notice_ms"] / t["rust"]["plain"]["cpu_per_notice_ms"]
        return base * scale(case) / scale("plain")

    rust_cpu *= scale("plain")
    return {
        "claimed_bytes": t["ledger_item_bytes"].get("claimed", {}).get("max", 401),
        "sent_bytes": t["ledger_item_bytes"]["sent"]["max"],
        "idempotency_bytes": t["idempotency_item_bytes"]["max"],
        "rust_cpu": rust_cpu,
        "python_cpu": py_cpu,
        # notice-sender with the rate gate on (as deployed): 3 DynamoDB calls on the send path.
        "rust_plain_s": lambda_seconds(rust_cpu, 3, ses, concurrent=True),
        "rust_replay_s": lambda_seconds(rust_cpu * rel("replay"), 2, 0, concurrent=True),
        "rust_quarantine_s": lambda_seconds(rust_cpu * rel("quarantine"), 2, ses, concurrent=True),
        "python_plain_s": lambda_seconds(py_cpu, 2, ses, concurrent=False),
        "rust_plain_log": t["rust"]["plain"]["log_bytes_per_notice"],
        "rust_replay_log": t["rust"]["replay"]["log_bytes_per_notice"],
        "rust_quarantine_log": t["rust"]["quarantine"]["log_bytes_per_notice"],
        "python_plain_log": t["python"]["plain"]["log_bytes_per_notice"],
    }


def table(out: dict) -> str:
    m = inputs(out)
    if m is None:
        return ""
    r = rows(m)
    cases = list(r[0][2])
    lines = [
        f"cost per 1 million notices, USD, us-east-1 list prices assumed as of {PRICES_AS_OF}",
        f"(CPU per notice: notice-sender {m['rust_cpu'] * 1e3:.2f} ms with its rate-gate call,"
        f" Powertools {m['python_cpu'] * 1e3:.2f} ms;"
        f" billed per batch of 10 at {MEMORY_MB} MB: notice-sender {m['rust_plain_s'] * 1e3:.0f} ms,"
        f" Powertools {m['python_plain_s'] * 1e3:.0f} ms)",
        "| | " + " | ".join(cases) + " |",
        "|---|" + "---|" * len(cases),
    ]
    totals = dict.fromkeys(cases, 0.0)
    for name, _unit, by_case in r:
        lines.append(f"| {name} | " + " | ".join(f"{by_case[c]:.2f}" for c in cases) + " |")
        for c in cases:
            totals[c] += by_case[c]
    no_ses = {c: totals[c] - r[-1][2][c] for c in cases}
    lines.append("| **total** | " + " | ".join(f"**{totals[c]:.2f}**" for c in cases) + " |")
    lines.append("| total without SES | " + " | ".join(f"{no_ses[c]:.2f}" for c in cases) + " |")
    return "\n".join(lines)
