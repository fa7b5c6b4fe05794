"""The emulator both senders run against, started the way the end-to-end harness starts it
(tests/harness/moto.rs): `tests/moto_serial.py` (moto's server, requests applied one at a time,
as real DynamoDB applies each conditional write atomically) on a free 127.0.0.1 port, polled on
`GET /moto-api/` until 200. Resources are created the way template.yaml deploys them.

`Proxy` sits between a sender and moto when the benchmark needs it: it counts every AWS call by
operation and outcome (the cost model's inputs; DynamoDB calls on a rate bucket item, `rate#…`,
are counted apart from the ledger's, and so are the keys each `BatchGetItem` asks for), and it
can hold SES calls for a fixed latency (`ses_latency`) or answer them with HTTP 500 without
forwarding (`ses_fail`: the outcome of the send is unknown, so the claim stays open: quarantine).
It answers SES v2 `GetAccount` itself (moto does not implement it; see `SES_ACCOUNT`).
"""

from __future__ import annotations

import collections
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import boto3
import yaml

REGION = "us-east-1"
CREDENTIALS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}

# SES v2 `GetAccount` (`GET /v2/email/account`), answered by the proxy because moto does not
# implement it. notice-sender reads `SendQuota.MaxSendRate` at cold start to size its rate limits
# (account bucket 90 % of it, each domain half of that, burst 5 s); without an answer it warns and
# falls back to 10/s burst 50 per domain, a sandbox-sized account. This is an SES account out of
# the sandbox with a production quota (1 000 sends/s, 1 million a day), as an account sending at
# this volume would have: the limits are then the shipped ones for such a user, and high enough
# that the benchmark's notices are never rate-limited (run.py checks that none were).
SES_ACCOUNT = {
    "SendQuota": {"Max24HourSend": 1000000.0, "MaxSendRate": 1000.0, "SentLast24Hours": 0.0},
    "SendingEnabled": True,
    "ProductionAccessEnabled": True,
}
GET_ACCOUNT_PATH = "/v2/email/account"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Moto:
    def __init__(self, python: str, root: Path, workdir: Path):
        self.python = python
        self.root = root
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None
        self.endpoint = ""

    def start(self, timeout: float = 60.0) -> None:
        last = ""
        for _ in range(3):  # a port picked as free can be taken before moto binds it
            port = free_port()
            log = open(self.workdir / "moto.log", "ab")
            env = dict(os.environ)
            env["MOTO_RECORDER_FILEPATH"] = str(self.workdir / "recording.jsonl")
            env["AWS_DEFAULT_REGION"] = REGION
            self.proc = subprocess.Popen(
                [self.python, str(self.root / "tests/moto_serial.py"), "-H", "127.0.0.1", "-p", str(port)],
                cwd=self.workdir, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            )
            log.close()
            self.endpoint = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2) as r:
                        if r.status == 200:
                            return
                except OSError as e:
                    last = str(e)
                time.sleep(0.1)
            self.stop()
        raise RuntimeError(f"moto did not come up: {last}; see {self.workdir / 'moto.log'}")

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None

    def client(self, service: str):
        return boto3.client(service, region_name=REGION, endpoint_url=self.endpoint, **CREDENTIALS)

    def create_ledger_table(self, name: str) -> None:
        """`NoticeTable` exactly as template.yaml declares it (keys, GSI, billing mode, TTL)."""
        props = ledger_table_properties(self.root / "template.yaml")
        ddb = self.client("dynamodb")
        args = {
            "TableName": name,
            "AttributeDefinitions": props["AttributeDefinitions"],
            "KeySchema": props["KeySchema"],
            "BillingMode": props.get("BillingMode", "PROVISIONED"),
        }
        if "GlobalSecondaryIndexes" in props:
            args["GlobalSecondaryIndexes"] = [
                {k: v for k, v in gsi.items() if k in ("IndexName", "KeySchema", "Projection", "ProvisionedThroughput")}
                for gsi in props["GlobalSecondaryIndexes"]
            ]
        ddb.create_table(**args)
        ttl = props.get("TimeToLiveSpecification")
        if ttl and ttl.get("Enabled"):
            ddb.update_time_to_live(
                TableName=name, TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True}
            )

    def create_idempotency_table(self, name: str) -> None:
        """The table Powertools' docs prescribe: partition key `id` (S), TTL on `expiration`."""
        ddb = self.client("dynamodb")
        ddb.create_table(
            TableName=name,
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        ddb.update_time_to_live(
            TableName=name, TimeToLiveSpecification={"AttributeName": "expiration", "Enabled": True}
        )

    def setup_ses(self, from_address: str, configuration_set: str) -> None:
        ses = self.client("sesv2")
        ses.create_email_identity(EmailIdentity=from_address)
        ses.create_configuration_set(ConfigurationSetName=configuration_set)

    def sent_count(self) -> int:
        with urllib.request.urlopen(f"{self.endpoint}/moto-api/data.json", timeout=60) as r:
            data = json.load(r)
        ses = data.get("ses", {})
        return len(ses.get("Message", [])) + len(ses.get("RawMessage", []))

    def scan(self, table: str) -> list[dict]:
        ddb = self.client("dynamodb")
        items, start = [], None
        while True:
            kwargs = {"TableName": table}
            if start:
                kwargs["ExclusiveStartKey"] = start
            out = ddb.scan(**kwargs)
            items.extend(out["Items"])
            start = out.get("LastEvaluatedKey")
            if not start:
                return items


def ledger_table_properties(template: Path) -> dict:
    """`Resources.NoticeTable.Properties` (CloudFormation's short tags read as plain values)."""

    class Loader(yaml.SafeLoader):
        pass

    def any_tag(loader, suffix, node):
        if isinstance(node, yaml.ScalarNode):
            return loader.construct_scalar(node)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node)
        return loader.construct_mapping(node)

    Loader.add_multi_constructor("!", any_tag)
    with open(template) as f:
        doc = yaml.load(f, Loader=Loader)  # noqa: S506 - SafeLoader subclass
    return doc["Resources"]["NoticeTable"]["Properties"]


def dynamodb_item_bytes(item: dict) -> int:
    """An item's size as DynamoDB bills it: attribute name lengths plus value sizes (strings
    as UTF-8, numbers about 1 byte per 2 digits + 1, booleans/nulls 1 byte, maps and lists
    3 bytes + their contents)."""

    def value_bytes(v: dict) -> int:
        (kind, val), = v.items()
        if kind == "S":
            return len(val.encode())
        if kind == "N":
            digits = len(val.lstrip("-").replace(".", "").lstrip("0")) or 1
            return (digits + 1) // 2 + 1
        if kind == "B":
            return len(val) if isinstance(val, (bytes, bytearray)) else len(val) * 3 // 4
        if kind in ("BOOL", "NULL"):
            return 1
        if kind == "M":
            return 3 + sum(len(k.encode()) + value_bytes(x) + 1 for k, x in val.items())
        if kind == "L":
            return 3 + sum(value_bytes(x) + 1 for x in val)
        if kind in ("SS", "NS", "BS"):
            return sum(value_bytes({kind[0]: x}) for x in val)
        return 0

    return sum(len(k.encode()) + value_bytes(v) for k, v in item.items())


class Proxy(ThreadingHTTPServer):
    """A counting reverse proxy to moto (HTTP/1.1 keep-alive both ways)."""

    daemon_threads = True

    def __init__(self, upstream: str, ses_latency: float = 0.0):
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.upstream = upstream.removeprefix("http://")
        self.ses_latency = ses_latency
        self.ses_fail = False
        self.lock = threading.Lock()
        self.calls: collections.Counter[tuple[str, str, str]] = collections.Counter()
        # Keys asked for by BatchGetItem calls (each key is billed as one read).
        self.batch_get_keys = 0
        self.local = threading.local()
        threading.Thread(target=self.serve_forever, name="proxy", daemon=True).start()

    @property
    def endpoint(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def reset_counts(self) -> None:
        with self.lock:
            self.calls.clear()
            self.batch_get_keys = 0

    def counts(self) -> collections.Counter:
        with self.lock:
            return collections.Counter(self.calls)

    def keys_read(self) -> int:
        """Keys the counted `BatchGetItem` calls asked for."""
        with self.lock:
            return self.batch_get_keys

    def close(self) -> None:
        self.shutdown()
        self.server_close()

    def handle_error(self, request, client_address) -> None:
        # A sender killed at the end of a run resets its idle keep-alive connections.
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


RATE_BUCKET_PREFIX = "rate#"  # shared/dynamodb/src/rate.rs: BUCKET_KEY_PREFIX
ACCOUNT_BUCKET = "rate#@account"
INDEX_SORT_KEY = "open_since"  # shared/dynamodb/src/item.rs: attr::OPEN_SINCE, the GSI's sort key


def _operation(method: str, path: str, headers, body: bytes) -> tuple[str, str, int]:
    """(service, operation, keys read): DynamoDB writes to a rate bucket item are named apart
    (`UpdateItem domain bucket`, `UpdateItem account bucket`), and so are the ledger writes that
    put a row in the open-claims index (`PutItem listed`: a claim made on the quarantine view;
    `UpdateItem quarantine view`: an open claim put on it), since DynamoDB bills an index write
    for each; `BatchGetItem` also gives the number of keys it asks for."""
    target = headers.get("X-Amz-Target", "")
    if target.startswith("DynamoDB_"):
        op = target.split(".", 1)[1]
        keys = 0
        if op in ("UpdateItem", "PutItem", "GetItem", "DeleteItem", "BatchGetItem"):
            try:
                request = json.loads(body or b"{}")
            except ValueError:
                request = {}
            if op == "BatchGetItem":
                keys = sum(len(t.get("Keys", [])) for t in request.get("RequestItems", {}).values())
            else:
                key = (request.get("Key") or request.get("Item") or {}).get("notice_key", {}).get("S", "")
                if key == ACCOUNT_BUCKET:
                    op += " account bucket"
                elif key.startswith(RATE_BUCKET_PREFIX):
                    op += " domain bucket"
                elif op == "PutItem" and INDEX_SORT_KEY in request.get("Item", {}):
                    op += " listed"
                elif op == "UpdateItem" and INDEX_SORT_KEY in request.get("ExpressionAttributeNames", {}).values() \
                        and request.get("UpdateExpression", "").startswith("SET") \
                        and "REMOVE" not in request.get("UpdateExpression", ""):
                    op += " quarantine view"
        return "dynamodb", op, keys
    if target.startswith("AmazonSQS."):
        return "sqs", target.split(".", 1)[1], 0
    if path.startswith("/v2/email/outbound-emails"):
        return "sesv2", "SendEmail", 0
    if method == "GET" and path.split("?")[0] == GET_ACCOUNT_PATH:
        return "sesv2", "GetAccount", 0
    return "other", f"{method} {path.split('?')[0]}", 0


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Proxy

    def log_message(self, format, *args):  # noqa: A002
        pass

    def _upstream(self) -> http.client.HTTPConnection:
        conn = getattr(self.server.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(self.server.upstream, timeout=60)
            self.server.local.conn = conn
        return conn

    def _forward(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        service, op, keys = _operation(self.command, self.path, self.headers, body)
        if op == "GetAccount":
            # moto has no GetAccount: answer with a production SES account (SES_ACCOUNT).
            status, reply_headers, reply = 200, [("Content-Type", "application/json")], json.dumps(SES_ACCOUNT).encode()
        elif service == "sesv2" and self.server.ses_fail:
            status, reply_headers, reply = 500, [("x-amzn-ErrorType", "InternalFailure")], b'{"message":"InternalFailure"}'
        else:
            if service == "sesv2" and self.server.ses_latency:
                time.sleep(self.server.ses_latency)
            for attempt in range(2):
                conn = self._upstream()
                try:
                    conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                    for k, v in self.headers.items():
                        if k.lower() not in ("connection", "keep-alive", "transfer-encoding"):
                            conn.putheader(k, v)
                    if "Content-Length" not in self.headers:
                        conn.putheader("Content-Length", str(len(body)))
                    conn.endheaders(body)
                    resp = conn.getresponse()
                    reply = resp.read()
                    status = resp.status
                    reply_headers = [
                        (k, v) for k, v in resp.getheaders()
                        if k.lower() not in ("connection", "keep-alive", "transfer-encoding", "content-length", "server", "date")
                    ]
                    break
                except (http.client.HTTPException, OSError):
                    conn.close()
                    self.server.local.conn = None
                    if attempt:
                        raise
        outcome = "ok" if status < 300 else str(status)
        if status >= 400:
            try:
                outcome = json.loads(reply or b"{}").get("__type", outcome).rsplit("#", 1)[-1]
            except ValueError:
                pass
        with self.server.lock:
            self.server.calls[(service, op, outcome)] += 1
            self.server.batch_get_keys += keys
        self.send_response(status)
        for k, v in reply_headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)
        self.wfile.flush()

    do_GET = do_POST = do_PUT = do_DELETE = _forward
