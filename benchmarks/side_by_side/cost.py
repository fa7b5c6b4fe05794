"""Cost per 1 million notices from what the benchmark measured, at AWS list prices.

Inputs measured by run.py: the AWS calls each case makes per notice (counted by the proxy in front
of the emulator, by operation and outcome, with the rate bucket writes and the keys each
BatchGetItem reads counted apart), ledger item sizes (scanned after the run), CPU per notice and
log bytes per notice, all in the configuration run.py measured (`--rate-limits`: by default
notice-sender as shipped, rate limits on). Everything else is a stated assumption (below), so the
table can be recomputed when a price or an assumption changes. Without counts (an old `--json`),
the calls fall back to FALLBACK_CALLS, the shipped send path as designed.

Lambda duration at 128 MB: Lambda gives a function CPU in proportion to its memory (1,769 MB = one
vCPU), so at 128 MB the process gets 128/1769 of a core and its CPU time stretches by 1769/128.
Billed duration per batch of 10 = the I/O path + CPU per batch ÷ that share. The I/O path:
notice-sender first reads the batch's ledger rows (BatchGetItem), then takes the domains' tokens
(their writes concurrently), then the account's, one round trip each, then runs the ten records
concurrently (claim, SendEmail, commit); the Powertools sender runs the records one after another.
Adding the two (instead of overlapping them) is conservative for notice-sender.
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


def lambda_seconds(cpu_per_notice_s: float, ddb_calls: float, ses_latency_s: float, concurrent: bool,
                   batch_rounds: int = 0) -> float:
    """Billed seconds per batch of 10 at 128 MB (see the module docstring): `batch_rounds` DynamoDB
    round trips for the whole batch first, then per record `ddb_calls` and the send."""
    per_record_io = ddb_calls * DYNAMODB_LATENCY_S + ses_latency_s
    io = batch_rounds * DYNAMODB_LATENCY_S + (per_record_io if concurrent else BATCH * per_record_io)
    return io + BATCH * cpu_per_notice_s / CPU_SHARE


# Calls per notice when a run has no counts: notice-sender as shipped (one BatchGetItem of the
# batch's 10 rows, one token write per recipient domain in the batch, assumed 7 with the default
# mix, and one for the account), the Powertools sender as documented. Keys: service:operation:outcome.
FALLBACK_CALLS = {
    "rust plain": {
        "dynamodb:BatchGetItem:ok": 0.1, "dynamodb:BatchGetItem keys read:-": 1.0,
        "dynamodb:UpdateItem domain bucket:ok": 0.7, "dynamodb:UpdateItem account bucket:ok": 0.1,
        "dynamodb:PutItem:ok": 1.0, "sesv2:SendEmail:ok": 1.0, "dynamodb:UpdateItem:ok": 1.0,
    },
    "rust replay": {"dynamodb:BatchGetItem:ok": 0.1, "dynamodb:BatchGetItem keys read:-": 1.0},
    "rust quarantine": {
        "dynamodb:BatchGetItem:ok": 0.1, "dynamodb:BatchGetItem keys read:-": 1.0,
        "dynamodb:UpdateItem domain bucket:ok": 0.7, "dynamodb:UpdateItem account bucket:ok": 0.1,
        "dynamodb:PutItem:ok": 1.0, "sesv2:SendEmail:500": 1.0,
    },
    "python plain": {"dynamodb:PutItem:ok": 1.0, "sesv2:SendEmail:ok": 1.0, "dynamodb:UpdateItem:ok": 1.0},
    # Its replay: the idempotency record's conditional PutItem is refused (the record is
    # COMPLETED) and the stored result returned with it.
    "python replay": {"dynamodb:PutItem:ConditionalCheckFailedException": 1.0},
}


class Calls:
    """One case's AWS calls per notice, grouped the way DynamoDB bills them."""

    def __init__(self, calls: dict[str, float]):
        self.calls = calls

    def _sum(self, service: str, op: str, outcome: str | None = None, not_outcome: str | None = None) -> float:
        total = 0.0
        for name, per in self.calls.items():
            s, o, r = name.split(":", 2)
            if s == service and o == op and (outcome is None or r == outcome) and (not_outcome is None or r != not_outcome):
                total += per
        return total

    @property
    def claims(self) -> float:
        """Claims made off the quarantine view (the sender Lambda's): the row alone."""
        return self._sum("dynamodb", "PutItem", "ok")

    @property
    def listed_claims(self) -> float:
        """Claims made on the quarantine view: the row and its open-claims index entry, whose
        removal the commit pays for too."""
        return self._sum("dynamodb", "PutItem listed", "ok")

    @property
    def view_writes(self) -> float:
        """Open claims put on the quarantine view (an unknown send, a held claim): the row and its
        index entry; the entry's removal is the reconciler's, when the claim is resolved."""
        return self._sum("dynamodb", "UpdateItem quarantine view", not_outcome="ThrottlingException")

    @property
    def refused_claims(self) -> float:
        """Claims that failed their condition: billed as a write of the held row."""
        return self._sum("dynamodb", "PutItem", "ConditionalCheckFailedException")

    @property
    def row_updates(self) -> float:
        """Commits and other transitions of a ledger row (any outcome but throttling: billed)."""
        return self._sum("dynamodb", "UpdateItem", not_outcome="ThrottlingException")

    @property
    def bucket_writes(self) -> float:
        return self._sum("dynamodb", "UpdateItem domain bucket") + self._sum("dynamodb", "UpdateItem account bucket")

    @property
    def keys_read(self) -> float:
        """Items read strongly consistently: BatchGetItem keys and GetItem calls."""
        return self._sum("dynamodb", "BatchGetItem keys read") + self._sum("dynamodb", "GetItem")

    @property
    def record_ddb_calls(self) -> float:
        """DynamoDB round trips on one record's own path (claim, commit, single reads)."""
        return (self._sum("dynamodb", "PutItem") + self._sum("dynamodb", "UpdateItem")
                + self._sum("dynamodb", "GetItem"))

    @property
    def batch_rounds(self) -> int:
        """DynamoDB round trips the whole batch waits for before its records run."""
        return sum(1 for op in ("BatchGetItem", "UpdateItem domain bucket", "UpdateItem account bucket")
                   if self._sum("dynamodb", op) > 0)

    @property
    def sqs_requests(self) -> float:
        """The sender's own SQS calls (visibility changes, dead-letter sends)."""
        return sum(per for name, per in self.calls.items() if name.startswith("sqs:"))

    def dynamodb_total(self) -> float:
        return sum(per for name, per in self.calls.items() if name.startswith("dynamodb:") and "keys read" not in name)


def rows(m: dict) -> list[tuple[str, str, dict[str, float]]]:
    """(line, unit, {case: dollars per 1M notices}) for notice-sender's three cases and the
    Powertools sender's plain case. `m` holds the measured inputs (see table())."""
    claimed, sent = m["claimed_bytes"], m["sent_bytes"]
    calls = {case: Calls(c) for case, c in m["calls"].items()}

    def ledger_wru(c: Calls) -> float:
        # As counted by the proxy, each write with the index writes DynamoDB bills for it: a claim
        # made off the quarantine view (PutItem) writes the row; one made on it (PutItem listed)
        # the row and its index entry, which its commit removes (one more index write); a commit
        # (UpdateItem) rewrites the row; an open claim put on the view (UpdateItem quarantine view)
        # rewrites the row and writes the entry; a refused claim is billed as a write of the held
        # (sent) row.
        return (c.claims * wru(claimed) + c.listed_claims * (wru(claimed) * 2 + 1)
                + c.view_writes * (wru(claimed) + 1) + c.row_updates * wru(sent) + c.refused_claims * wru(sent))

    def sender(c: Calls) -> dict:
        return dict(sender_wru=ledger_wru(c), rate_wru=c.bucket_writes, sender_rru=c.keys_read * rru_strong(sent),
                    sender_sqs=c.sqs_requests)

    cases = {}
    # Per notice: ledger writes (table + open-claims index) and reads, rate bucket writes (1 WRU:
    # a bucket item is about 100 bytes), sends, events, messages, all as counted in the run.
    # Reconciler per event — a model, not counted from the run: one strongly consistent read unit
    # (its row in the batch's BatchGetItem, which DynamoDB bills per item) and a conditional
    # PutItem. Events for one row in the same batch share the read and the write (one each); an
    # event its row already records writes nothing; neither saving is credited here.
    cases["plain"] = dict(
        **sender(calls["rust plain"]),
        recon_wru=EVENTS_PER_SENT * wru(sent),
        recon_rru=EVENTS_PER_SENT * rru_strong(sent),
        emails=1, events=EVENTS_PER_SENT, messages=1, invocations=1 / BATCH,
        lambda_s=m["rust_plain_s"], log_bytes=m["rust_plain_log"],
    )
    # replay-heavy: every notice is also replayed once after it was sent, with the calls a replay
    # made in the run (as shipped: the batch read finds the rows sent, so no token and no claim).
    # Nothing is sent.
    replay = sender(calls["rust replay"])
    cases["replay"] = dict(
        **{k: cases["plain"][k] + replay[k] for k in replay},
        recon_wru=cases["plain"]["recon_wru"], recon_rru=cases["plain"]["recon_rru"],
        emails=1, events=EVENTS_PER_SENT, messages=2, invocations=2 / BATCH,
        lambda_s=m["rust_plain_s"] + m["rust_replay_s"],
        log_bytes=m["rust_plain_log"] + m["rust_replay_log"],
    )
    # quarantine-heavy: every send's outcome is unknown (a 5xx after SES accepted the mail). No
    # commit: the claim stays in the open-claims index until the Send event resolves it (reconciler
    # write + index delete); SES bills the mail it accepted.
    cases["quarantine"] = dict(
        **sender(calls["rust quarantine"]),
        recon_wru=EVENTS_PER_SENT * wru(sent) + wru(sent),
        recon_rru=EVENTS_PER_SENT * rru_strong(sent),
        emails=1, events=EVENTS_PER_SENT, messages=1, invocations=1 / BATCH,
        lambda_s=m["rust_quarantine_s"], log_bytes=m["rust_quarantine_log"],
    )
    # The Powertools sender, plain: idempotency record (PutItem) + completion (UpdateItem), no
    # index; the same events, messages and reconciler (it needs one to learn deliveries too).
    py = calls["python plain"]
    idem = wru(m["idempotency_bytes"])
    cases["powertools plain"] = dict(
        sender_wru=(py.claims + py.refused_claims + py.row_updates) * idem,
        rate_wru=py.bucket_writes, sender_rru=py.keys_read * rru_strong(m["idempotency_bytes"]),
        sender_sqs=py.sqs_requests,
        recon_wru=cases["plain"]["recon_wru"], recon_rru=cases["plain"]["recon_rru"],
        emails=1, events=EVENTS_PER_SENT, messages=1, invocations=1 / BATCH,
        lambda_s=m["python_plain_s"], log_bytes=m["python_plain_log"],
    )
    # The Powertools sender's replay-heavy case, as the anchor of ours: the plain case plus the
    # same notices sent again, each refused by its idempotency record's conditional write.
    py_replay = calls["python replay"]
    cases["powertools replay"] = dict(
        sender_wru=cases["powertools plain"]["sender_wru"]
        + (py_replay.claims + py_replay.refused_claims + py_replay.row_updates) * idem,
        rate_wru=py.bucket_writes + py_replay.bucket_writes,
        sender_rru=(py.keys_read + py_replay.keys_read) * rru_strong(m["idempotency_bytes"]),
        sender_sqs=py.sqs_requests + py_replay.sqs_requests,
        recon_wru=cases["plain"]["recon_wru"], recon_rru=cases["plain"]["recon_rru"],
        emails=1, events=EVENTS_PER_SENT, messages=2, invocations=2 / BATCH,
        lambda_s=m["python_plain_s"] + m["python_replay_s"],
        log_bytes=m["python_plain_log"] + m["python_replay_log"],
    )
    p = PRICES
    n = 1e6
    out = []

    def line(name, unit, f):
        out.append((name, unit, {case: f(c) * n for case, c in cases.items()}))

    line("DynamoDB writes: sender (claim, commit; open-claims index only for a claim left open)", "WRU", lambda c: c["sender_wru"] * p["dynamodb_wru"])
    line("DynamoDB writes: rate buckets (per batch: one per recipient domain, one for the account)", "WRU",
         lambda c: c["rate_wru"] * p["dynamodb_wru"])
    line("DynamoDB reads: sender (the batch's ledger rows, strongly consistent)", "RRU",
         lambda c: c["sender_rru"] * p["dynamodb_rru"])
    line("DynamoDB: reconciler (read + write per event)", "WRU+RRU",
         lambda c: c["recon_wru"] * p["dynamodb_wru"] + c["recon_rru"] * p["dynamodb_rru"])
    line("Lambda sender: GB-seconds at 128 MB, arm64", "GB-s",
         lambda c: c["lambda_s"] * (MEMORY_MB / 1024) / BATCH * p["lambda_gb_s_arm64"])
    line("Lambda sender: requests", "invocations", lambda c: c["invocations"] * p["lambda_request"])
    line("SQS: jobs (send, receive, delete in batches of 10; the sender's own SQS calls)", "requests",
         lambda c: (c["messages"] * (1 + 2 / BATCH) + c["sender_sqs"]) * p["sqs_request"])
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
    # Replay and quarantine CPU relative to plain as measured in the throughput run, in the
    # configuration that run measured (no rescaling: by default that is the shipped one).

    def rel(case: str) -> float:
        return t["rust"][case]["cpu_per_notice_ms"] / t["rust"]["plain"]["cpu_per_notice_ms"]

    counted = {
        f"{who} {case}": t[who][case].get("calls_per_notice") or FALLBACK_CALLS[f"{who} {case}"]
        for who, case in (("rust", "plain"), ("rust", "replay"), ("rust", "quarantine"), ("python", "plain"),
                          ("python", "replay"))
        if case in t[who] or f"{who} {case}" in FALLBACK_CALLS
    }
    c = {k: Calls(v) for k, v in counted.items()}
    return {
        # "default" (as shipped) or "off"; older runs stored NOTICE_RATE_LIMITS itself (None: off).
        "rate_limits": t.get("rate_limits") if t.get("rate_limits") in ("default", "off")
        else (f"NOTICE_RATE_LIMITS={t['rate_limits']}" if t.get("rate_limits") else "off"),
        "calls": counted,
        "claimed_bytes": t["ledger_item_bytes"].get("claimed", {}).get("max", 401),
        "sent_bytes": t["ledger_item_bytes"]["sent"]["max"],
        "idempotency_bytes": t["idempotency_item_bytes"]["max"],
        "rust_cpu": rust_cpu,
        "python_cpu": py_cpu,
        # The DynamoDB round trips per batch and per record as counted (see lambda_seconds).
        "rust_plain_s": lambda_seconds(rust_cpu, c["rust plain"].record_ddb_calls, ses, concurrent=True,
                                       batch_rounds=c["rust plain"].batch_rounds),
        "rust_replay_s": lambda_seconds(rust_cpu * rel("replay"), c["rust replay"].record_ddb_calls, 0,
                                        concurrent=True, batch_rounds=c["rust replay"].batch_rounds),
        "rust_quarantine_s": lambda_seconds(rust_cpu * rel("quarantine"), c["rust quarantine"].record_ddb_calls, ses,
                                            concurrent=True, batch_rounds=c["rust quarantine"].batch_rounds),
        "python_plain_s": lambda_seconds(py_cpu, c["python plain"].record_ddb_calls, ses, concurrent=False,
                                         batch_rounds=c["python plain"].batch_rounds),
        "rust_plain_log": t["rust"]["plain"]["log_bytes_per_notice"],
        "rust_replay_log": t["rust"]["replay"]["log_bytes_per_notice"],
        "rust_quarantine_log": t["rust"]["quarantine"]["log_bytes_per_notice"],
        "python_plain_log": t["python"]["plain"]["log_bytes_per_notice"],
        # Powertools' replay as measured beside its plain case (CPU relative to plain, as ours).
        "python_replay_s": lambda_seconds(
            py_cpu * t["python"]["replay"]["cpu_per_notice_ms"] / t["python"]["plain"]["cpu_per_notice_ms"],
            c["python replay"].record_ddb_calls, 0, concurrent=False, batch_rounds=c["python replay"].batch_rounds),
        "python_replay_log": t["python"]["replay"]["log_bytes_per_notice"],
    }


def table(out: dict) -> str:
    m = inputs(out)
    if m is None:
        return ""
    r = rows(m)
    cases = list(r[0][2])
    lines = [
        f"cost per 1 million notices, USD, us-east-1 list prices assumed as of {PRICES_AS_OF};"
        f" notice-sender rate limits: {m['rate_limits']}",
        f"(DynamoDB calls per notice as counted: notice-sender {Calls(m['calls']['rust plain']).dynamodb_total():.2f},"
        f" Powertools {Calls(m['calls']['python plain']).dynamodb_total():.2f};"
        f" CPU per notice: notice-sender {m['rust_cpu'] * 1e3:.2f} ms,"
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
