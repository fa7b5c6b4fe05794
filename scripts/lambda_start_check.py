#!/usr/bin/env python3
"""Start check for the Lambda binaries `sam build` produced (run by scripts/deploy-check.sh).

    lambda_start_check.py functions TEMPLATE
        one line per AWS::Serverless::Function: logical id, CodeUri, binary name
    lambda_start_check.py default-architecture TEMPLATE
        the Architecture parameter's default (what `sam build` builds as shipped)
    lambda_start_check.py start TEMPLATE LOGICAL_ID BOOTSTRAP [--qemu 'CMD …'] [--param K=V …]
                                [--refuse-without VAR [--refusal-mentions TEXT]]

`start` runs BOOTSTRAP the way Lambda starts it: a clean environment made of what the template
gives the function (Globals + the function's own variables, intrinsic functions resolved to the
values CloudFormation would produce for a stack named `notice-ledger` in us-east-1) plus the
variables the Lambda service sets (AWS_LAMBDA_RUNTIME_API, AWS_LAMBDA_FUNCTION_NAME, credentials,
…). AWS_LAMBDA_RUNTIME_API points at a Runtime API stub served here; AWS_ENDPOINT_URL points at the
same stub, which answers Secrets Manager GetSecretValue for the secrets the template names
(every `*_SECRET_ARN` variable of the function: the key secret, the intake's webhook secret), SES
v2 GetAccount (the sender's account rate), DynamoDB GetItem/PutItem of the ledger's key check (none
yet: the first start records it), SSM GetParameter for the notice configuration's pointer
and S3 GetObject for the configuration it points at (examples/notices-de, packed as
`noticectl config publish` packs it), so nothing reaches AWS. The check passes when the binary's first GET
/2018-06-01/runtime/invocation/next arrives, with no init error, no WARN or ERROR log line before it
and the process still running. With --refuse-without VAR it then starts the binary again without
VAR and requires the opposite: no poll, a non-zero exit, and its output naming the variable
(or TEXT).

Any failure exits 1 and prints the binary's output. Nothing is skipped.
"""

import argparse
import json
import os
import queue
import re
import secrets
import shlex
import string
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

REGION = "us-east-1"
ACCOUNT = "123456789012"
STACK = "notice-ledger"
NEXT_PATH = "/2018-06-01/runtime/invocation/next"
NO_VALUE = object()


# --------------------------------------------------------------------------- the template


class CfnLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short-form tags (!Ref, !Sub, …) as their long forms."""


def _construct_tag(loader, suffix, node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    if suffix == "Condition":
        return {"Condition": value}
    return {"Fn::" + suffix: value}


CfnLoader.add_multi_constructor("!", _construct_tag)


def load_template(path):
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=CfnLoader)


def functions(template):
    for logical_id, res in template.get("Resources", {}).items():
        if res.get("Type") == "AWS::Serverless::Function":
            yield logical_id, res


class Resolver:
    """Resolves intrinsic functions to the values a deployed stack would have."""

    def __init__(self, template, params):
        self.t = template
        self.resources = template.get("Resources", {})
        self.params = {}
        for name, spec in template.get("Parameters", {}).items():
            if name in params:
                self.params[name] = params[name]
            elif "Default" in spec:
                self.params[name] = str(spec["Default"])
        self.pseudo = {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::StackName": STACK,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
        }

    def condition(self, name):
        return bool(self.value(self.t["Conditions"][name]))

    def physical_name(self, logical_id):
        return f"{STACK}-{logical_id}-1EXAMPLE0ID"

    def ref(self, name):
        if name == "AWS::NoValue":
            return NO_VALUE
        if name in self.pseudo:
            return self.pseudo[name]
        if name in self.t.get("Parameters", {}):
            if name not in self.params:
                raise SystemExit(f"start check: parameter {name} has no default: pass --param {name}=…")
            return self.params[name]
        res = self.resources.get(name)
        if res is None:
            raise SystemExit(f"start check: !Ref {name}: no such parameter or resource")
        kind, props = res["Type"], res.get("Properties", {})
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{self.physical_name(name)}"
        if kind == "AWS::SecretsManager::Secret":
            return f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{name}-Ab12Cd"
        if kind == "AWS::SNS::Topic":
            return f"arn:aws:sns:{REGION}:{ACCOUNT}:{self.physical_name(name)}"
        if kind == "AWS::KMS::Key":
            return "1234abcd-12ab-34cd-56ef-1234567890ab"
        if kind == "AWS::Logs::LogGroup" and "LogGroupName" in props:
            return self.value(props["LogGroupName"])
        if kind == "AWS::Serverless::Function" and "FunctionName" in props:
            return self.value(props["FunctionName"])
        return self.physical_name(name)

    def get_att(self, name, attr):
        res = self.resources.get(name)
        if res is None:
            raise SystemExit(f"start check: !GetAtt {name}.{attr}: no such resource")
        kind = res["Type"]
        physical = self.ref(name)
        if attr == "QueueName":
            return physical.rsplit("/", 1)[-1]
        if attr != "Arn":
            raise SystemExit(f"start check: !GetAtt {name}.{attr} is not modelled; extend {__file__}")
        return {
            "AWS::SQS::Queue": lambda: f"arn:aws:sqs:{REGION}:{ACCOUNT}:{physical.rsplit('/', 1)[-1]}",
            "AWS::IAM::Role": lambda: f"arn:aws:iam::{ACCOUNT}:role/{physical}",
            "AWS::DynamoDB::Table": lambda: f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{physical}",
            "AWS::Scheduler::ScheduleGroup": lambda: f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule-group/{physical}",
            "AWS::KMS::Key": lambda: f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{physical}",
            "AWS::SecretsManager::Secret": lambda: physical,
            "AWS::SNS::Topic": lambda: physical,
        }.get(kind, lambda: f"arn:aws:{kind.split('::')[1].lower()}:{REGION}:{ACCOUNT}:{physical}")()

    def sub(self, text, local=None):
        local = local or {}

        def one(match):
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in local:
                return str(self.value(local[name]))
            if "." in name and name.split(".", 1)[0] in self.resources:
                return str(self.get_att(*name.split(".", 1)))
            return str(self.ref(name))

        return re.sub(r"\$\{([^}]+)\}", one, text)

    def value(self, node):
        if isinstance(node, list):
            return [v for v in (self.value(n) for n in node) if v is not NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            (key, arg), = node.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Fn::GetAtt":
                return self.get_att(arg[0], arg[1])
            if key == "Fn::Sub":
                return self.sub(arg) if isinstance(arg, str) else self.sub(arg[0], arg[1])
            if key == "Fn::If":
                return self.value(arg[1] if self.condition(arg[0]) else arg[2])
            if key == "Fn::Equals":
                return str(self.value(arg[0])) == str(self.value(arg[1]))
            if key == "Fn::Not":
                return not self.value(arg[0])
            if key == "Fn::And":
                return all(self.value(a) for a in arg)
            if key == "Fn::Or":
                return any(self.value(a) for a in arg)
            if key == "Condition":
                return self.condition(arg)
            if key == "Fn::Join":
                return arg[0].join(str(v) for v in self.value(arg[1]))
            if key.startswith("Fn::"):
                raise SystemExit(f"start check: {key} is not modelled; extend {__file__}")
        out = {}
        for k, v in node.items():
            v = self.value(v)
            if v is not NO_VALUE:
                out[k] = v
        return out


def function_setting(template, res, name, default=None):
    props = res.get("Properties", {})
    if name in props:
        return props[name]
    return template.get("Globals", {}).get("Function", {}).get(name, default)


def template_environment(template, resolver, logical_id):
    """The function's variables exactly as CloudFormation would set them (Globals merged)."""
    res = template["Resources"][logical_id]
    merged = dict(template.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {}))
    merged.update(res.get("Properties", {}).get("Environment", {}).get("Variables", {}))
    env = {}
    for key, node in merged.items():
        value = resolver.value(node)
        if value is NO_VALUE:
            continue
        env[key] = str(value)
    return env


def service_environment(template, resolver, logical_id, runtime_api):
    """What the Lambda service adds for a provided.al2023 function."""
    res = template["Resources"][logical_id]
    name = resolver.ref(logical_id)
    memory = resolver.value(function_setting(template, res, "MemorySize", 128))
    globals_logging = template.get("Globals", {}).get("Function", {}).get("LoggingConfig", {})
    logging = {**globals_logging, **res.get("Properties", {}).get("LoggingConfig", {})}
    log_group = resolver.value(logging["LogGroup"]) if "LogGroup" in logging else f"/aws/lambda/{name}"
    env = {
        "AWS_LAMBDA_RUNTIME_API": runtime_api,
        "AWS_LAMBDA_FUNCTION_NAME": name,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(memory),
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
        "AWS_LAMBDA_LOG_GROUP_NAME": log_group,
        "AWS_LAMBDA_LOG_STREAM_NAME": "2026/01/01/[$LATEST]0123456789abcdef0123456789abcdef",
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "ASIAEXAMPLESTARTCHECK",
        "AWS_SECRET_ACCESS_KEY": "start-check-secret-access-key",
        "AWS_SESSION_TOKEN": "start-check-session-token",
        "_HANDLER": str(resolver.value(function_setting(template, res, "Handler", "bootstrap"))),
        "LAMBDA_TASK_ROOT": "/var/task",
        "LAMBDA_RUNTIME_DIR": "/var/runtime",
        "LANG": "en_US.UTF-8",
        "TZ": ":UTC",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
    }
    if logging.get("LogFormat") == "JSON":
        env["AWS_LAMBDA_LOG_FORMAT"] = "JSON"
    return env


# --------------------------------------------------------------------------- the Runtime API stub


def published_bundle(directory):
    """A notice configuration directory as `noticectl config publish` uploads it: canonical JSON
    (keys sorted, no spaces, non-ASCII as is), named by its SHA-256."""
    import hashlib

    files = {}
    for name in ("manifest.json", "windows.json"):
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            files[name] = f.read()
    for name in sorted(os.listdir(os.path.join(directory, "templates"))):
        with open(os.path.join(directory, "templates", name), encoding="utf-8") as f:
            files[f"templates/{name}"] = f.read()
    doc = {"files": files, "format": "notice-config/1"}
    data = json.dumps(doc, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return data, hashlib.sha256(data).hexdigest()


class Stub:
    def __init__(self, secret_arns, config=None):
        """`secret_arns`: the secrets GetSecretValue answers (each with the same random value).
        `config`: (SSM parameter name, bucket, published bytes, their hex digest) or None."""
        self.secret_arns = set(secret_arns)
        self.config = config
        self.secret_value = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(64))
        self.events = queue.Queue()
        self.closing = threading.Event()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def body(self):
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def reply(self, status, payload=b"", content_type="application/json"):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self):
                if self.path == NEXT_PATH:
                    stub.events.put(("next", None))
                    # Hold the poll: no invocation is ever handed out.
                    while not stub.closing.wait(0.2):
                        pass
                    self.close_connection = True
                    return
                if self.path == "/v2/email/account":
                    # SES v2 GetAccount: the sender sizes its account bucket from MaxSendRate.
                    stub.events.put(("aws", "sesv2.GetAccount"))
                    out = {"SendQuota": {"Max24HourSend": 50000.0, "MaxSendRate": 14.0, "SentLast24Hours": 0.0},
                           "SendingEnabled": True, "ProductionAccessEnabled": True}
                    self.reply(200, json.dumps(out).encode())
                    return
                if stub.config:
                    parameter, bucket, data, digest = stub.config
                    if self.path == f"/{bucket}/notice-config/{digest}.json":
                        # S3 GetObject (path-style: an endpoint override is set).
                        stub.events.put(("aws", "s3.GetObject(notice-config)"))
                        self.reply(200, data, "application/json")
                        return
                stub.events.put(("unexpected", f"GET {self.path}"))
                self.reply(404)

            def do_POST(self):
                data = self.body()
                target = self.headers.get("X-Amz-Target", "")
                if self.path == "/2018-06-01/runtime/init/error":
                    stub.events.put(("init_error", data.decode("utf-8", "replace")))
                    self.reply(202, b'{"status":"OK"}')
                    return
                if self.path.startswith("/2018-06-01/runtime/invocation/"):
                    stub.events.put(("unexpected", f"POST {self.path} (no invocation was handed out)"))
                    self.reply(202, b'{"status":"OK"}')
                    return
                if target == "secretsmanager.GetSecretValue":
                    request = json.loads(data or b"{}")
                    asked = request.get("SecretId")
                    stub.events.put(("aws", f"secretsmanager.GetSecretValue({asked})"))
                    if asked in stub.secret_arns:
                        out = {"ARN": asked, "Name": asked.split(":")[-1], "SecretString": stub.secret_value,
                               "VersionId": "00000000-0000-0000-0000-000000000001",
                               "VersionStages": ["AWSCURRENT"], "CreatedDate": 1767225600.0}
                        self.reply(200, json.dumps(out).encode(), "application/x-amz-json-1.1")
                    else:
                        err = {"__type": "ResourceNotFoundException",
                               "Message": f"start-check stub: the template names no secret {asked}"}
                        self.reply(400, json.dumps(err).encode(), "application/x-amz-json-1.1")
                    return
                if target in ("DynamoDB_20120810.GetItem", "DynamoDB_20120810.PutItem"):
                    # The sender's key check at start: the ledger holds none yet (GetItem: no
                    # item), so the first start records it (PutItem, conditional: accepted).
                    request = json.loads(data or b"{}")
                    key = (request.get("Key") or request.get("Item") or {}).get("notice_key", {}).get("S")
                    op = target.split(".")[-1]
                    stub.events.put(("aws", f"dynamodb.{op}({key})"))
                    if key == "meta#key_check":
                        self.reply(200, b"{}", "application/x-amz-json-1.0")
                    else:
                        err = {"__type": "com.amazon.coral.validate#ValidationException",
                               "message": f"start-check stub: no item {key} at start"}
                        stub.events.put(("aws", f"unexpected DynamoDB item {key}"))
                        self.reply(400, json.dumps(err).encode(), "application/x-amz-json-1.0")
                    return
                if target == "AmazonSSM.GetParameter" and stub.config:
                    parameter, bucket, _published, digest = stub.config
                    asked = json.loads(data or b"{}").get("Name")
                    stub.events.put(("aws", f"ssm.GetParameter({asked})"))
                    if asked == parameter:
                        value = f"s3://{bucket}/notice-config/{digest}.json"
                        out = {"Parameter": {"Name": asked, "Type": "String", "Value": value, "Version": 1,
                                             "DataType": "text", "ARN": f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter{asked}"}}
                        self.reply(200, json.dumps(out).encode(), "application/x-amz-json-1.1")
                    else:
                        err = {"__type": "ParameterNotFound", "message": f"start-check stub: no parameter {asked}"}
                        self.reply(400, json.dumps(err).encode(), "application/x-amz-json-1.1")
                    return
                stub.events.put(("aws", f"unexpected AWS call {target or self.path}"))
                err = {"__type": "UnknownOperationException", "message": "start-check stub"}
                self.reply(400, json.dumps(err).encode(), "application/x-amz-json-1.1")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def address(self):
        host, port = self.server.server_address[:2]
        return f"{host}:{port}"

    def close(self):
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()


# --------------------------------------------------------------------------- one start


def bad_log_lines(lines):
    bad = []
    for line in lines:
        level = None
        try:
            level = str(json.loads(line).get("level", "")).upper()
        except (ValueError, AttributeError):
            m = re.search(r"\b(WARN|WARNING|ERROR)\b", line)
            level = m.group(1) if m else None
        if level in ("WARN", "WARNING", "ERROR"):
            bad.append(line)
    return bad


def secret_arns(fn_env):
    """The secrets a function reads at start: the values of its `*_SECRET_ARN` variables."""
    return [v for k, v in sorted(fn_env.items()) if k.endswith("_SECRET_ARN") and v]


def run_once(cmd, env, secret_arns, timeout, config=None):
    stub = Stub(secret_arns, config)
    env = dict(env)
    env["AWS_LAMBDA_RUNTIME_API"] = stub.address
    # Not part of Lambda's environment: keeps every AWS call of the start on the stub.
    env["AWS_ENDPOINT_URL"] = f"http://{stub.address}"
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(l.decode("utf-8", "replace").rstrip("\n")
                                                          for l in proc.stdout), daemon=True)
    reader.start()
    result = {"polled": False, "init_error": None, "aws_calls": [], "unexpected": [], "exit": None}
    deadline = started + timeout
    try:
        while time.monotonic() < deadline:
            try:
                kind, detail = stub.events.get(timeout=0.1)
            except queue.Empty:
                if proc.poll() is not None:
                    # Drain what the stub saw before the exit.
                    time.sleep(0.2)
                    while not stub.events.empty():
                        kind, detail = stub.events.get()
                        record(result, kind, detail)
                    break
                continue
            record(result, kind, detail)
            if kind in ("next", "init_error"):
                time.sleep(0.3)  # let the last log lines arrive
                break
        result["seconds"] = time.monotonic() - started
        result["exit"] = proc.poll()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.join(timeout=5)
        stub.close()
    result["lines"] = list(lines)
    return result


def record(result, kind, detail):
    if kind == "next":
        result["polled"] = True
    elif kind == "init_error":
        result["init_error"] = detail
    elif kind == "aws":
        result["aws_calls"].append(detail)
    else:
        result["unexpected"].append(detail)


def show_output(lines):
    for line in lines:
        print(f"      | {line}")


def start(args):
    template = load_template(args.template)
    params = dict(p.split("=", 1) for p in args.param)
    resolver = Resolver(template, params)
    if args.function not in template.get("Resources", {}):
        raise SystemExit(f"start check: no function {args.function} in {args.template}")
    fn_env = template_environment(template, resolver, args.function)
    env = {**fn_env, **service_environment(template, resolver, args.function, "")}
    qemu = shlex.split(args.qemu or "")
    cmd = qemu + [os.path.abspath(args.bootstrap)]
    name = env["AWS_LAMBDA_FUNCTION_NAME"]
    print(f"    environment from {args.template} ({args.function}): "
          + ", ".join(f"{k}={v}" for k, v in sorted(fn_env.items())))
    if qemu:
        print(f"    running under {args.qemu}")

    config = None
    if fn_env.get("NOTICE_CONFIG", "").startswith("ssm:"):
        # The notice configuration `noticectl config publish` would have put in place.
        data, digest = published_bundle(os.path.join(os.path.dirname(os.path.abspath(args.template)),
                                                     "examples", "notices-de"))
        config = (fn_env["NOTICE_CONFIG"][len("ssm:"):], params.get("NoticeConfigBucket", ""), data, digest)
    r = run_once(cmd, env, secret_arns(fn_env), args.timeout, config)
    problems = []
    if not r["polled"]:
        if r["exit"] is not None:
            problems.append(f"exited with status {r['exit']} before polling {NEXT_PATH}")
        else:
            problems.append(f"did not poll {NEXT_PATH} within {args.timeout:.0f} s")
    if r["exit"] is not None and r["polled"]:
        problems.append(f"exited with status {r['exit']} right after polling")
    if r["init_error"]:
        problems.append(f"reported an init error: {r['init_error']}")
    problems += [f"unexpected request: {u}" for u in r["unexpected"]]
    problems += [f"unexpected AWS call at start: {c}" for c in r["aws_calls"] if c.startswith("unexpected")]
    bad = bad_log_lines(r["lines"])
    if bad:
        problems.append(f"{len(bad)} WARN/ERROR log line(s) at start (a configuration the template as shipped should not leave)")
    calls = ", ".join(r["aws_calls"]) or "none"
    if problems:
        print(f"    FAILED: {name}: " + "; ".join(problems))
        print(f"    AWS calls at start: {calls}; its output:")
        show_output(r["lines"])
        return 1
    print(f"    ok: first GET {NEXT_PATH} after {r['seconds']:.2f} s, no init error, no WARN/ERROR; "
          f"AWS calls at start: {calls}")
    show_output(r["lines"])

    if args.refuse_without:
        var = args.refuse_without
        mention = args.refusal_mentions or var
        if var not in env:
            print(f"    FAILED: --refuse-without {var}: the template does not give {name} that variable")
            return 1
        without = {k: v for k, v in env.items() if k != var}
        r = run_once(cmd, without, secret_arns(fn_env), args.timeout, config)
        text = "\n".join(r["lines"])
        if r["polled"] or r["exit"] in (None, 0) or mention not in text:
            print(f"    FAILED: without {var}, {name} "
                  + ("polled for work" if r["polled"] else f"exited with {r['exit']}")
                  + ("" if mention in text else f" and never named {mention}") + "; its output:")
            show_output(r["lines"])
            return 1
        print(f"    ok: without {var} it refuses to start (exit {r['exit']}, names {mention}, never polls)")
        show_output(r["lines"])
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("functions")
    p.add_argument("template")
    p = sub.add_parser("default-architecture")
    p.add_argument("template")
    p = sub.add_parser("start")
    p.add_argument("template")
    p.add_argument("function")
    p.add_argument("bootstrap")
    p.add_argument("--qemu", help="emulator command line, e.g. 'qemu-aarch64-static -L /usr/aarch64-linux-gnu'")
    p.add_argument("--param", action="append", default=[], help="template parameter K=V (those without a default)")
    p.add_argument("--refuse-without", help="also require the binary to refuse to start without this variable")
    p.add_argument("--refusal-mentions", help="text the refusal must contain (default: the variable's name)")
    p.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()

    if args.cmd == "functions":
        template = load_template(args.template)
        for logical_id, res in functions(template):
            props = res.get("Properties", {})
            binary = res.get("Metadata", {}).get("BuildProperties", {}).get("Binary", "")
            print(logical_id, props.get("CodeUri", "."), binary)
        return 0
    if args.cmd == "default-architecture":
        template = load_template(args.template)
        print(template["Parameters"]["Architecture"]["Default"])
        return 0
    return start(args)


if __name__ == "__main__":
    sys.exit(main())
