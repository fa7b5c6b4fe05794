"""A local Lambda Runtime API and the processes behind it.

`RuntimeApi` serves the three calls a runtime makes (`GET …/invocation/next`, `POST
…/invocation/{id}/response|error`, `POST …/init/error`) over HTTP/1.1 keep-alive on a free
127.0.0.1 port, the way Lambda's own endpoint does. `Function` spawns one runtime process against
it and measures what the benchmark reports: cold start (spawn → first `/next`), CPU of the whole
process (utime + stime from /proc/<pid>/stat, and the per-thread scheduler clocks), peak RSS
(VmHWM) and the wall time of each invocation (event handed over → response received).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

NEXT = "/2018-06-01/runtime/invocation/next"
INVOCATION = "/2018-06-01/runtime/invocation/"
INIT_ERROR = "/2018-06-01/runtime/init/error"
FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:{name}"
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class Invocation:
    request_id: str
    body: bytes
    handed_at: float = 0.0
    done_at: float = 0.0
    response: bytes = b""
    error: bool = False
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def wall(self) -> float:
        return self.done_at - self.handed_at


class RuntimeApi(ThreadingHTTPServer):
    """One function's Runtime API. `first_poll_at` is `time.perf_counter()` of the first `/next`."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, name: str):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.name = name
        self.pending: queue.Queue[Invocation] = queue.Queue()
        self.invocations: dict[str, Invocation] = {}
        self.first_poll_at: float | None = None
        self.first_poll = threading.Event()
        self.init_error: bytes | None = None
        self.polls = 0
        self._thread = threading.Thread(target=self.serve_forever, name=f"runtime-api-{name}", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        host, port = self.server_address[:2]
        return f"{host}:{port}"

    def invoke(self, event: dict, timeout: float = 120.0, deadline_s: float = 300.0) -> Invocation:
        """Hands `event` to the next `/next` poll and waits for the runtime's answer."""
        inv = Invocation(request_id=str(uuid.uuid4()), body=json.dumps(event).encode())
        inv.deadline_ms = int((time.time() + deadline_s) * 1000)  # type: ignore[attr-defined]
        self.invocations[inv.request_id] = inv
        self.pending.put(inv)
        if not inv.done.wait(timeout):
            raise TimeoutError(f"{self.name}: no answer to invocation {inv.request_id} within {timeout} s")
        return inv

    def close(self) -> None:
        self.shutdown()
        self.server_close()

    def handle_error(self, request, client_address) -> None:
        # A runtime killed between spawns resets its held `/next`: expected, not worth a trace.
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: RuntimeApi

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def _reply(self, status: int, body: bytes = b"{}", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path != NEXT:
            self._reply(404, b'{"errorMessage":"not found"}')
            return
        api = self.server
        if api.first_poll_at is None:
            api.first_poll_at = time.perf_counter()
            api.first_poll.set()
        api.polls += 1
        inv = api.pending.get()
        headers = {
            "Lambda-Runtime-Aws-Request-Id": inv.request_id,
            "Lambda-Runtime-Deadline-Ms": str(inv.deadline_ms),  # type: ignore[attr-defined]
            "Lambda-Runtime-Invoked-Function-Arn": FUNCTION_ARN.format(name=api.name),
            "Lambda-Runtime-Trace-Id": f"Root=1-{uuid.uuid4().hex[:8]}-{uuid.uuid4().hex[:24]};Sampled=0",
        }
        inv.handed_at = time.perf_counter()
        self._reply(200, inv.body, headers)

    def do_POST(self):  # noqa: N802
        body = self._read_body()
        api = self.server
        if self.path == INIT_ERROR:
            api.init_error = body
            self._reply(202, b'{"status":"OK"}')
            return
        if self.path.startswith(INVOCATION):
            rest = self.path[len(INVOCATION):]
            request_id, _, kind = rest.partition("/")
            inv = api.invocations.get(request_id)
            if inv is None or kind not in ("response", "error"):
                self._reply(400, b'{"errorMessage":"unknown invocation"}')
                return
            inv.done_at = time.perf_counter()
            inv.response = body
            inv.error = kind == "error"
            self._reply(202, b'{"status":"OK"}')
            inv.done.set()
            return
        self._reply(404, b'{"errorMessage":"not found"}')


def lambda_env(name: str, api: RuntimeApi, extra: dict[str, str]) -> dict[str, str]:
    """What Lambda puts in a function's environment (the parts the runtimes read), plus `extra`."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "en_US.UTF-8",
        "TZ": ":UTC",
        "AWS_LAMBDA_RUNTIME_API": api.address,
        "AWS_LAMBDA_FUNCTION_NAME": name,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128",
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{name}",
        "AWS_LAMBDA_LOG_STREAM_NAME": "bench",
        # template.yaml: LoggingConfig LogFormat JSON (Lambda then sets both of these).
        "AWS_LAMBDA_LOG_FORMAT": "JSON",
        "AWS_LAMBDA_LOG_LEVEL": "INFO",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    env.update(extra)
    return env


def cpu_ticks_seconds(pid: int) -> float:
    """utime + stime of the whole process (all threads, live and exited), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def cpu_sched_seconds(pid: int) -> tuple[float, frozenset[int]]:
    """Sum of the live threads' scheduler run time (ns resolution) and the thread ids it covers."""
    total = 0
    tids = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
            tids.append(int(tid))
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total / 1e9, frozenset(tids)


def vm_hwm_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmHWM for {pid}")


@dataclass
class CpuSnapshot:
    ticks: float
    sched: float
    tids: frozenset[int]

    @classmethod
    def of(cls, pid: int) -> "CpuSnapshot":
        ticks = cpu_ticks_seconds(pid)
        sched, tids = cpu_sched_seconds(pid)
        return cls(ticks, sched, tids)

    def minus(self, earlier: "CpuSnapshot") -> float:
        """CPU seconds between two snapshots: the scheduler clocks when no thread came or went
        (ns resolution), else utime + stime (clock-tick resolution)."""
        if self.tids == earlier.tids:
            return self.sched - earlier.sched
        return self.ticks - earlier.ticks


class Function:
    """One runtime process behind its own Runtime API."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_path: Path, cwd: Path | None = None):
        self.name = name
        self.argv = argv
        self.extra_env = env
        self.log_path = log_path
        self.cwd = cwd
        self.api: RuntimeApi | None = None
        self.proc: subprocess.Popen | None = None
        self.cold_start: float | None = None
        self.init_cpu: float | None = None

    def start(self, timeout: float = 60.0) -> float:
        """Spawns the runtime; returns the cold start (spawn → first `/next`) in seconds."""
        self.stop()
        self.api = RuntimeApi(self.name)
        env = lambda_env(self.name, self.api, self.extra_env)
        log = open(self.log_path, "ab")
        started = time.perf_counter()
        self.proc = subprocess.Popen(
            self.argv, env=env, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
        log.close()
        deadline = started + timeout
        while not self.api.first_poll.wait(0.01):
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.proc.returncode} before polling; "
                    f"init error: {self.api.init_error!r}; log: {self.log_path}\n{self.log_tail()}"
                )
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{self.name}: no /next poll within {timeout} s; log: {self.log_path}")
        self.cold_start = self.api.first_poll_at - started
        self.init_cpu = cpu_ticks_seconds(self.proc.pid)
        return self.cold_start

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def invoke(self, event: dict) -> Invocation:
        assert self.api is not None and self.proc is not None
        inv = self.api.invoke(event)
        if inv.error:
            raise RuntimeError(f"{self.name} invocation failed: {inv.response[:2000]!r}\n{self.log_tail()}")
        return inv

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def cpu(self) -> CpuSnapshot:
        return CpuSnapshot.of(self.pid)

    def peak_rss_kib(self) -> int:
        return vm_hwm_kib(self.pid)

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None
        if self.api is not None:
            self.api.close()
            self.api = None
