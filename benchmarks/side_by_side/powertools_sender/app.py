"""The usual way to get "send each reminder once" on Lambda, written the way the Powertools docs
show it: the batch utility over an SQS batch, and the idempotency utility (DynamoDB persistence
layer) around one SES v2 SendEmail per notice.

It does the same work per notice as notice-sender, as far as Powertools' model allows: parse and
check the job, the notice key (the same HMAC-SHA256 as the contract), the send window, render
subject/text/HTML, then the idempotency record (a conditional PutItem `INPROGRESS`), exactly one
SendEmail attempt (retries off, like notice-sender's SES client) tagged with the notice key, and
the record's completion (UpdateItem `COMPLETED` with the MessageId). One INFO log line per notice.
With NOTICE_RATE_LIMIT_PER_MINUTE set it also does what notice-sender's rate gate does before the
claim: one conditional UpdateItem on a per-domain counter (same table), so both do equal work.

Run under the real runtime interface client: `python -m awslambdaric app.handler`.
Environment: IDEMPOTENCY_TABLE, NOTICE_KEY_SECRET, NOTICE_FROM, NOTICE_CONFIGURATION_SET,
NOTICE_RATE_LIMIT_PER_MINUTE (optional), and the standard AWS variables (AWS_ENDPOINT_URL reaches
the emulator).
"""

import hashlib
import hmac
import json
import os
import re
import time
from datetime import datetime, timedelta, timezone
from html import escape

import boto3
from botocore.config import Config

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

logger = Logger(service="notice-sender-powertools")
processor = BatchProcessor(event_type=EventType.SQS)

persistence = DynamoDBPersistenceLayer(table_name=os.environ["IDEMPOTENCY_TABLE"])
# Keyed by the notice key; the rendered content is validated so a changed payload under the same
# key is refused (notice-sender's payload digest). Records kept 400 days (notice-sender's default
# retention).
idempotency = IdempotencyConfig(
    event_key_jmespath="notice_key",
    payload_validation_jmespath="[email, subject, text]",
    expires_after_seconds=400 * 86_400,
    raise_on_no_idempotency_key=True,
)

# One attempt per send, bounded: a retried SendEmail can deliver a second copy.
ses = boto3.client(
    "sesv2",
    config=Config(retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=3, read_timeout=8),
)

RATE_LIMIT = int(os.environ.get("NOTICE_RATE_LIMIT_PER_MINUTE") or 0)
dynamodb = boto3.client("dynamodb") if RATE_LIMIT else None

SECRET = os.environ["NOTICE_KEY_SECRET"].encode()
FROM = os.environ["NOTICE_FROM"]
CONFIGURATION_SET = os.environ.get("NOTICE_CONFIGURATION_SET") or None

KIND = re.compile(r"^[a-z0-9_]{1,64}$")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
OPENS_BEFORE = timedelta(hours=72)
CLOSES_BEFORE = timedelta(hours=24)


class InvalidJob(ValueError):
    pass


class RateLimited(RuntimeError):
    pass


def admit(domain: str) -> None:
    """notice-sender's rate gate: one conditional counter write per admitted send."""
    window = int(time.time()) // 60
    try:
        dynamodb.update_item(
            TableName=os.environ["IDEMPOTENCY_TABLE"],
            Key={"id": {"S": f"rate#{domain}#{window}"}},
            UpdateExpression="ADD #count :one SET expiration = :expires",
            ConditionExpression="attribute_not_exists(#count) OR #count < :limit",
            ExpressionAttributeNames={"#count": "admitted"},
            ExpressionAttributeValues={
                ":one": {"N": "1"},
                ":limit": {"N": str(RATE_LIMIT)},
                ":expires": {"N": str((window + 1) * 60 + 86_400)},
            },
        )
    except dynamodb.exceptions.ConditionalCheckFailedException as e:
        raise RateLimited(domain) from e


def parse_job(body: str) -> dict:
    job = json.loads(body)
    for field in ("subscription_id", "period_start", "kind", "email", "charge_at"):
        value = job.get(field)
        if not isinstance(value, str) or not value:
            raise InvalidJob(f"{field} is required")
        if "|" in value or any(ord(c) < 32 for c in value):
            raise InvalidJob(f"{field} contains | or a control character")
    if not DATE.match(job["period_start"]):
        raise InvalidJob("period_start must be YYYY-MM-DD")
    if not KIND.match(job["kind"]):
        raise InvalidJob("kind must be [a-z0-9_]{1,64}")
    revision = job.get("revision", 0)
    if not isinstance(revision, int) or revision < 0:
        raise InvalidJob("revision must be an integer >= 0")
    job["revision"] = revision
    job["charge_at"] = datetime.fromisoformat(job["charge_at"].replace("Z", "+00:00"))
    return job


def notice_key(job: dict) -> str:
    identity = f"{job['subscription_id']}|{job['period_start']}|{job['kind']}|{job['revision']}"
    return hmac.new(SECRET, identity.encode(), hashlib.sha256).hexdigest()


def render(job: dict, key: str) -> tuple[str, str, str]:
    data = job.get("template_data") or {}
    plan = str(data.get("plan_name", "your subscription"))
    amount = str(data.get("amount", ""))
    when = job["charge_at"].strftime("%B %d, %Y")
    link_sig = hmac.new(SECRET, f"manage|{job['subscription_id']}".encode(), hashlib.sha256).hexdigest()[:32]
    link = f"https://billing.example.com/manage?s={job['subscription_id']}&sig={link_sig}"
    subject = f"Your {plan} renews on {when}"
    text = f"Hello,\n\nYour {plan} renews on {when} for {amount}.\nManage or cancel: {link}\n"
    html = (
        f"<p>Hello,</p><p>Your {escape(plan)} renews on {escape(when)} for {escape(amount)}.</p>"
        f'<p><a href="{escape(link)}">Manage or cancel</a></p>'
    )
    return subject, text, html


@idempotent_function(data_keyword_argument="notice", config=idempotency, persistence_store=persistence)
def send_notice(notice: dict) -> dict:
    text = lambda data: {"Data": data, "Charset": "UTF-8"}  # noqa: E731
    request = {
        "FromEmailAddress": FROM,
        "Destination": {"ToAddresses": [notice["email"]]},
        "Content": {
            "Simple": {
                "Subject": text(notice["subject"]),
                "Body": {"Text": text(notice["text"]), "Html": text(notice["html"])},
                "Headers": [{"Name": "X-Notice-Key", "Value": notice["notice_key"]}],
            }
        },
        "EmailTags": [
            {"Name": "notice_key", "Value": notice["notice_key"]},
            {"Name": "kind", "Value": notice["kind"]},
        ],
    }
    if CONFIGURATION_SET:
        request["ConfigurationSetName"] = CONFIGURATION_SET
    response = ses.send_email(**request)
    return {"message_id": response["MessageId"]}


def record_handler(record: SQSRecord) -> None:
    job = parse_job(record.body)
    now = datetime.now(timezone.utc)
    if not (job["charge_at"] - OPENS_BEFORE <= now < job["charge_at"] - CLOSES_BEFORE):
        # Outside the window: fail the record (the batch utility reports it; SQS retries it).
        raise InvalidJob("outside the send window")
    key = notice_key(job)
    subject, text, html = render(job, key)
    if RATE_LIMIT:
        admit(job["email"].rsplit("@", 1)[1].lower())
    notice = {
        "notice_key": key,
        "email": job["email"],
        "kind": job["kind"],
        "subject": subject,
        "text": text,
        "html": html,
    }
    result = send_notice(notice=notice)
    logger.info("processed", extra={"notice_key": key, "message_id": result["message_id"]})


@logger.inject_lambda_context
def handler(event, context):
    idempotency.register_lambda_context(context)
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
