#!/usr/bin/env python3
"""A reference producer for notice-ledger: billing facts in, reminder jobs (and withdraws) out.

It follows the producer contract in docs/job.md ("The producer contract"):

- ``period_start`` is the first day of the billing period the charge pays for, *in the billing
  system's own terms*: either the date the billing system states, or an instant it states plus the
  time zone it defines its days in. Never the producer's local clock, never the charge date
  because it happens to be at hand.
- ``revision`` comes from the facts (the producer's record of the terms it announced), never from
  a per-attempt counter. It defaults to 0.
- Nothing about the delivery (webhook event id, attempt, timestamp, host) enters the message: the
  body is built from the named fields below only, so a retried or replayed webhook builds the same
  body and the ledger derives the same key.

Every line of the input is validated before anything is sent: one bad line and nothing goes out
(exit 1, the line and the field named). The notice key is computed locally (the contract's
HMAC-SHA256) when ``NOTICE_KEY_SECRET`` is set, so it can be logged next to the SQS message id.

Billing facts, one JSON object per line::

    {"subscription_id": "sub_8812", "kind": "renewal_notice_t72", "period_start": "2026-10-01",
     "charge_at": "2026-10-01T09:00:00Z", "email": "ada@example.com", "revision": 0,
     "jurisdiction": "US-CA", "locale": "en-US", "time_zone": "America/Los_Angeles",
     "plan_name": "Coffee Box", "amount": {"minor": 2900, "currency": "USD"}}

    {"subscription_id": "sub_9031", "kind": "renewal_notice_t72",
     "period_start_at": "2026-10-01T06:30:00Z", "billing_time_zone": "America/Los_Angeles", ...}

    {"action": "withdraw", "subscription_id": "sub_8812", "period_start": "2026-10-01",
     "kind": "renewal_notice_t72", "revision": 0, "reason": "subscription cancelled"}

Usage::

    python3 notice_producer.py send FACTS.jsonl [--queue-url URL] [--dry-run]
    python3 notice_producer.py key --subscription-id S --period-start YYYY-MM-DD --kind K [--revision N]

``FACTS.jsonl`` may be ``-`` (standard input). The queue URL defaults to ``REMINDER_QUEUE_URL``;
AWS settings come from the standard variables (``AWS_REGION``, ``AWS_ENDPOINT_URL``, …).
``--dry-run`` prints the message bodies only (one per line, ready for ``noticectl validate -``)
and sends nothing. Exit codes: 0 all sent; 1 an invalid line (nothing sent); 2 usage,
configuration or SQS unreachable (the message says how many were sent before it stopped).

Standard library only, except boto3 for sending (pinned in requirements.txt).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import hmac
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Iterable, Optional

# The contract's limits (docs/job.md, "The reminder job").
MAX_SUBSCRIPTION_ID_BYTES = 256
MAX_REVISION = 2**53 - 1  # exact in every JSON parser, JavaScript's included
MAX_REASON_CHARS = 500
MIN_SECRET_BYTES = 16  # what the sender accepts from configuration

KIND_RE = re.compile(r"[a-z0-9_]{1,64}")
DATE_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
RFC3339_RE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:([Zz])|([+-])(\d{2}):(\d{2}))"
)
# Unicode category Cc, as Rust's char::is_control.
CONTROL_RE = re.compile(r"[\u0000-\u001f\u007f-\u009f]")
JURISDICTION_RE = re.compile(r"[A-Za-z]{2}(?:-[A-Za-z0-9]{1,3})?")
IANA_ZONE_RE = re.compile(r"[A-Za-z][A-Za-z0-9_+-]*(?:/[A-Za-z0-9_+-]+)*")
CURRENCY_RE = re.compile(r"[A-Z]{3}")


class InvalidFacts(ValueError):
    """A fact that cannot become a message; names the field, as the sender's errors do."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"field `{field}` {reason}")
        self.field = field
        self.reason = reason


class ConfigError(Exception):
    """Usage, configuration or a dependency: exit 2."""


# ---------------------------------------------------------------------------------- the key


def notice_key(secret: bytes, subscription_id: str, period_start: str, kind: str, revision: int) -> str:
    """The notice key exactly as the contract defines it (UTF-8, revision in decimal)."""
    material = f"{subscription_id}|{period_start}|{kind}|{revision}"
    return hmac.new(secret, material.encode("utf-8"), hashlib.sha256).hexdigest()


def secret_from_env(environ: Optional[dict] = None) -> Optional[bytes]:
    """``NOTICE_KEY_SECRET`` as the sender reads it, or None when unset. Refused as the sender
    refuses it: empty, blank, or shorter than 16 bytes (keys made with it would match nothing)."""
    environ = os.environ if environ is None else environ
    value = environ.get("NOTICE_KEY_SECRET")
    if value is None:
        return None
    raw = value.encode("utf-8")
    if not raw.strip():
        raise ConfigError("NOTICE_KEY_SECRET is empty or blank")
    if len(raw) < MIN_SECRET_BYTES:
        raise ConfigError(f"NOTICE_KEY_SECRET is {len(raw)} bytes; at least {MIN_SECRET_BYTES} are required")
    return raw


# ---------------------------------------------------------------------------- validation


def _identity_text(field: str, value: Any, max_bytes: int) -> str:
    if not isinstance(value, str):
        raise InvalidFacts(field, "is required and must be a string")
    if not value:
        raise InvalidFacts(field, "must not be empty")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidFacts(field, "is not valid Unicode (a lone surrogate)") from None
    if size > max_bytes:
        raise InvalidFacts(field, f"must be at most {max_bytes} bytes")
    if "|" in value:
        raise InvalidFacts(field, "must not contain '|'")
    if CONTROL_RE.search(value):
        raise InvalidFacts(field, "must not contain control characters")
    return value


def _real_date(field: str, year: int, month: int, day: int) -> dt.date:
    try:
        return dt.date(year, month, day)
    except ValueError:
        raise InvalidFacts(field, "is not a real calendar date") from None


def check_period_start(value: Any) -> str:
    """``YYYY-MM-DD`` and nothing else: no time, no offset, a real calendar day."""
    if not isinstance(value, str):
        raise InvalidFacts("period_start", "must be a date string in YYYY-MM-DD form")
    m = DATE_RE.fullmatch(value)
    if not m:
        hint = " (a timestamp: take the date the billing system states for the period)" if "T" in value else ""
        raise InvalidFacts("period_start", f"must be a date in YYYY-MM-DD form, got {value!r}{hint}")
    _real_date("period_start", *map(int, m.groups()))
    return value


def parse_rfc3339(field: str, value: Any) -> dt.datetime:
    """An RFC 3339 timestamp with an explicit offset (``Z`` or ``±hh:mm``): a time without one is
    a time on somebody's local clock."""
    if not isinstance(value, str):
        raise InvalidFacts(field, "must be an RFC 3339 timestamp string")
    m = RFC3339_RE.fullmatch(value)
    if not m:
        raise InvalidFacts(field, f"must be an RFC 3339 timestamp with an offset (Z or +hh:mm), got {value!r}")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    fraction, zulu, sign, off_h, off_m = m.groups()[6:]
    _real_date(field, year, month, day)
    if hour > 23 or minute > 59 or second > 59:
        raise InvalidFacts(field, "is not a real time of day")
    if zulu:
        offset = dt.timedelta(0)
    else:
        if int(off_h) > 23 or int(off_m) > 59:
            raise InvalidFacts(field, "has an impossible UTC offset")
        offset = dt.timedelta(hours=int(off_h), minutes=int(off_m)) * (1 if sign == "+" else -1)
    micros = int((fraction[1:] + "000000")[:6]) if fraction else 0
    return dt.datetime(year, month, day, hour, minute, second, micros, tzinfo=dt.timezone(offset))


def period_start_in_zone(instant: str, billing_time_zone: str) -> str:
    """The calendar day an instant falls on in the zone the billing system defines its days in —
    the producer's own zone plays no part."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    at = parse_rfc3339("period_start_at", instant)
    if not isinstance(billing_time_zone, str) or not IANA_ZONE_RE.fullmatch(billing_time_zone):
        raise InvalidFacts("billing_time_zone", "must be an IANA time-zone name such as Europe/Berlin or UTC")
    try:
        zone = ZoneInfo(billing_time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidFacts("billing_time_zone", f"is not a known IANA time zone: {billing_time_zone!r}") from None
    return at.astimezone(zone).date().isoformat()


def _revision(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidFacts("revision", "must be an integer >= 0 (from the announced terms, never an attempt counter)")
    if not 0 <= value <= MAX_REVISION:
        raise InvalidFacts("revision", f"must be an integer in 0..={MAX_REVISION}")
    return value


def _period_start(facts: dict) -> str:
    given = facts.get("period_start")
    at = facts.get("period_start_at")
    if given is not None and at is not None:
        raise InvalidFacts("period_start", "is given twice (with `period_start_at`): give one")
    if at is not None:
        zone = facts.get("billing_time_zone")
        if zone is None:
            raise InvalidFacts(
                "billing_time_zone",
                "is required with `period_start_at`: the billing system's zone, never the producer's local one",
            )
        return period_start_in_zone(at, zone)
    if given is None:
        raise InvalidFacts("period_start", "is required (or `period_start_at` with `billing_time_zone`)")
    return check_period_start(given)


def _email(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidFacts("email", "is required and must be a string")
    local, at, domain = value.rpartition("@")
    if not at or not local or not domain or "@" in local or any(c.isspace() for c in value):
        raise InvalidFacts("email", "must be one plain address (local@domain)")
    if CONTROL_RE.search(value) or "," in value or "<" in value:
        raise InvalidFacts("email", "must be one plain address (local@domain)")
    return value


def _optional_str(facts: dict, field: str, pattern: Optional[re.Pattern], what: str) -> Optional[str]:
    value = facts.get(field)
    if value is None:
        return None
    if not isinstance(value, str) or (pattern is not None and not pattern.fullmatch(value)):
        raise InvalidFacts(field, f"must be {what}")
    return value


def _template_data(facts: dict) -> dict:
    extra = facts.get("template_data")
    if extra is None:
        data: dict = {}
    elif isinstance(extra, dict):
        data = dict(extra)
    else:
        raise InvalidFacts("template_data", "must be a JSON object")
    plan = facts.get("plan_name")
    if plan is not None:
        if not isinstance(plan, str) or not plan:
            raise InvalidFacts("plan_name", "must be a non-empty string")
        data["plan_name"] = plan
    amount = facts.get("amount")
    if amount is not None:
        if not isinstance(amount, dict) or set(amount) != {"minor", "currency"}:
            raise InvalidFacts("amount", 'must be {"minor": <integer>, "currency": "<ISO 4217>"}')
        minor, currency = amount["minor"], amount["currency"]
        if isinstance(minor, bool) or not isinstance(minor, int) or not 0 <= minor <= MAX_REVISION:
            raise InvalidFacts("amount", "`minor` must be an integer >= 0 in the currency's minor units")
        if not isinstance(currency, str) or not CURRENCY_RE.fullmatch(currency):
            raise InvalidFacts("amount", "`currency` must be an upper-case ISO 4217 code")
        data["amount"] = {"minor": minor, "currency": currency}
    return data


# ------------------------------------------------------------------------------- building


@dataclass(frozen=True)
class Message:
    """One queue message: its body and the identity the ledger keys it on."""

    body: dict
    subscription_id: str
    period_start: str
    kind: str
    revision: int

    @property
    def action(self) -> str:
        return self.body.get("action", "send")

    def key(self, secret: bytes) -> str:
        return notice_key(secret, self.subscription_id, self.period_start, self.kind, self.revision)

    def body_json(self) -> str:
        return json.dumps(self.body, ensure_ascii=False, separators=(",", ":"))


def build_message(facts: Any) -> Message:
    """Billing facts → a job, or a withdraw when ``facts["action"] == "withdraw"``. Only the named
    fields are read: anything else the facts carry (webhook ids, attempts, timestamps) is ignored
    and never reaches the message."""
    if not isinstance(facts, dict):
        raise InvalidFacts("body", "must be a JSON object")
    action = facts.get("action", "send")
    if action not in ("send", "withdraw"):
        raise InvalidFacts("action", "must be `send` or `withdraw`")
    subscription_id = _identity_text("subscription_id", facts.get("subscription_id"), MAX_SUBSCRIPTION_ID_BYTES)
    period_start = _period_start(facts)
    kind = facts.get("kind")
    if not isinstance(kind, str) or not KIND_RE.fullmatch(kind):
        raise InvalidFacts("kind", "is required: 1 to 64 characters of [a-z0-9_]")
    revision = _revision(facts.get("revision"))
    identity = {"subscription_id": subscription_id, "period_start": period_start, "kind": kind, "revision": revision}

    if action == "withdraw":
        body: dict = {"action": "withdraw", **identity}
        reason = facts.get("reason")
        if reason is not None:
            if not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS or CONTROL_RE.search(reason):
                raise InvalidFacts("reason", f"must be one line of at most {MAX_REASON_CHARS} characters")
            body["reason"] = reason
        return Message(body, subscription_id, period_start, kind, revision)

    body = dict(identity)
    body["email"] = _email(facts.get("email"))
    charge_at = facts.get("charge_at")
    if charge_at is None:
        raise InvalidFacts("charge_at", "is required (RFC 3339, when the card is charged)")
    parse_rfc3339("charge_at", charge_at)
    body["charge_at"] = charge_at
    jurisdiction = _optional_str(facts, "jurisdiction", JURISDICTION_RE, "an ISO 3166 code such as DE or US-CA")
    if jurisdiction is not None:
        body["jurisdiction"] = jurisdiction.upper()
    for field, pattern, what in (
        ("locale", None, "a BCP 47 language tag such as en-US"),
        ("time_zone", IANA_ZONE_RE, "an IANA time-zone name such as Europe/Berlin"),
    ):
        value = _optional_str(facts, field, pattern, what)
        if value is not None:
            body[field] = value
    body["template_data"] = _template_data(facts)
    return Message(body, subscription_id, period_start, kind, revision)


def read_facts(lines: Iterable[str]) -> tuple[list[tuple[int, Message]], list[str]]:
    """Every non-blank line built, or every error with its line number."""
    messages, errors = [], []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            facts = json.loads(line)
        except json.JSONDecodeError as e:
            errors.append(f"line {number}: invalid: field `body` is not valid JSON: {e}")
            continue
        try:
            messages.append((number, build_message(facts)))
        except InvalidFacts as e:
            errors.append(f"line {number}: invalid: {e}")
    return messages, errors


# -------------------------------------------------------------------------------- sending


def sqs_client():
    try:
        import boto3  # noqa: PLC0415 — only the send path needs it
    except ImportError:
        here = os.path.dirname(os.path.abspath(__file__))
        raise ConfigError(
            f"boto3 is not installed: pip install -r {os.path.join(here, 'requirements.txt')}"
        ) from None
    return boto3.client("sqs")  # region, endpoint and credentials from the standard AWS variables


def send(messages: list[tuple[int, Message]], queue_url: str, secret: Optional[bytes], out) -> int:
    """One SendMessage per message, in input order. A standard queue: no MessageGroupId, no
    deduplication id, no attributes (the ledger deduplicates; the key is in the body's identity).
    The SDK's own retries may enqueue a copy twice: harmless, both copies carry one key."""
    client = sqs_client()
    sent = 0
    for number, message in messages:
        try:
            reply = client.send_message(QueueUrl=queue_url, MessageBody=message.body_json())
        except Exception as e:  # botocore's errors: unreachable, throttled, access denied, …
            raise ConfigError(
                f"line {number}: SQS refused or could not be reached ({type(e).__name__}: {e}); "
                f"{sent} of {len(messages)} sent before it stopped — sending the same file again is safe"
            ) from None
        sent += 1
        record = {
            "line": number,
            "action": message.action,
            "notice_key": message.key(secret) if secret else None,
            "message_id": reply.get("MessageId"),
            "body": message.body,
        }
        out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        out.flush()
    return sent


# ------------------------------------------------------------------------------------ CLI


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="notice_producer.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_send = sub.add_parser("send", help="build, validate and enqueue one message per line of billing facts")
    p_send.add_argument("facts", help="JSON Lines of billing facts, or - for standard input")
    p_send.add_argument("--queue-url", default=os.environ.get("REMINDER_QUEUE_URL"))
    p_send.add_argument("--dry-run", action="store_true", help="print the message bodies only; send nothing")
    p_key = sub.add_parser("key", help="the notice key of one identity (NOTICE_KEY_SECRET)")
    p_key.add_argument("--subscription-id", required=True)
    p_key.add_argument("--period-start", required=True)
    p_key.add_argument("--kind", required=True)
    p_key.add_argument("--revision", type=int, default=0)
    args = parser.parse_args(argv)
    # Bodies may carry non-ASCII text (names, amounts): write UTF-8 whatever the locale says.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(encoding="utf-8")

    try:
        secret = secret_from_env()
        if args.command == "key":
            if secret is None:
                raise ConfigError("NOTICE_KEY_SECRET is not set")
            message = build_message(
                {
                    "action": "withdraw",
                    "subscription_id": args.subscription_id,
                    "period_start": args.period_start,
                    "kind": args.kind,
                    "revision": args.revision,
                }
            )
            print(message.key(secret))
            return 0

        if args.facts == "-":
            messages, errors = read_facts(sys.stdin)
        else:
            try:
                with open(args.facts, encoding="utf-8") as f:
                    messages, errors = read_facts(f)
            except (OSError, UnicodeDecodeError) as e:
                raise ConfigError(f"cannot read {args.facts}: {e}") from None
        if errors:
            for line in errors:
                print(f"notice_producer: {line}", file=sys.stderr)
            print(f"notice_producer: {len(errors)} invalid line(s): nothing sent", file=sys.stderr)
            return 1
        if args.dry_run:
            for number, message in messages:
                print(message.body_json())
                if secret:
                    print(f"line {number}: {message.action} notice_key={message.key(secret)}", file=sys.stderr)
            return 0
        if not args.queue_url:
            raise ConfigError("no queue: pass --queue-url or set REMINDER_QUEUE_URL")
        sent = send(messages, args.queue_url, secret, sys.stdout)
        withdraws = sum(1 for _, m in messages if m.action == "withdraw")
        print(f"notice_producer: sent {sent} message(s) ({sent - withdraws} jobs, {withdraws} withdraws)", file=sys.stderr)
        return 0
    except InvalidFacts as e:
        print(f"notice_producer: invalid: {e}", file=sys.stderr)
        return 1
    except ConfigError as e:
        print(f"notice_producer: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
