"""Starting the local stack (`python -m tools.local_stack`) as a subprocess on free ports."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import requests

PROJECT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], Any], timeout_s: float, what: str, until: Callable[[Any], bool] = bool) -> Any:
    """Poll `check` until `until` holds for its result (default: the result is truthy) and return
    that result; connection errors count as not yet. The one way the e2e tests wait."""
    deadline = time.monotonic() + timeout_s
    result = None
    while time.monotonic() < deadline:
        try:
            result = check()
        except requests.RequestException:
            result = None
        if until(result):
            return result
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}; last seen: {result!r}")


def stack_command(port: int, aws_port: int, state_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tools.local_stack",
        "--port",
        str(port),
        "--aws-port",
        str(aws_port),
        "--max-batching-window",
        "1",
        "--state-dir",
        str(state_dir),
        "--admin-key-file",
        str(admin_key_file(state_dir)),
        *extra,
    ]


def admin_key_file(state_dir: Path) -> Path:
    """Where a stack keeps its admin key: beside its data, so a restarted stack has the same key."""
    return state_dir / "local-admin-key"


def stage_path() -> str:
    """Where the local stage's API is, as API Gateway serves it: `/<api_gateway_stage>`."""
    from tools import stage

    return "/" + stage.api_gateway_stage("local", PROJECT)


class LocalStack:
    """A running local stack. `url` is the API's base (`http://127.0.0.1:<port>/api`, no
    trailing slash; the origin alone for a stack mapped at the root) and `origin` its scheme,
    host and port. `get`/`post`/`request` take a path below `url` and send the local admin key
    (`admin_key`) unless given `key=` (None: no key); `http` is a requests session that sends
    it too."""

    def __init__(
        self,
        origin: str,
        base_path: str,
        process: subprocess.Popen[bytes],
        log_path: Path,
        port: int,
        aws_port: int,
        state_dir: Path,
    ) -> None:
        self.origin = origin
        self.base_path = base_path
        self.url = origin + base_path
        self.process = process
        self.log_path = log_path
        self.port = port
        self.aws_port = aws_port
        self.state_dir = state_dir
        self.admin_key_path = admin_key_file(state_dir)
        self.http = requests.Session()

    @property
    def admin_key(self) -> str:
        return self.admin_key_path.read_text().strip()

    @property
    def item_key(self) -> bytes:
        """The stack's key for item hashes (tools/local_stack.py keeps it in its state directory)."""
        from tools.local_stack import ITEM_KEY_FILE

        return (self.state_dir / ITEM_KEY_FILE).read_bytes()

    def request(self, method: str, path: str, key: str | bool | None = True, **kwargs: Any) -> requests.Response:
        headers = dict(kwargs.pop("headers", None) or {})
        if key is True:
            key = self.admin_key
        if isinstance(key, str):
            headers.setdefault("Authorization", f"Bearer {key}")
        kwargs.setdefault("timeout", 30)
        return requests.request(method, f"{self.url}{path}", headers=headers, **kwargs)

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("POST", path, **kwargs)

    def messages_left(self, queue: str) -> int:
        """Messages in `queue` (its stage name), waiting or being handled: SQS's approximate
        counts (AWS documents them as approximate; the emulator's are exact)."""
        import boto3

        sqs = boto3.client(
            "sqs",
            endpoint_url=f"http://127.0.0.1:{self.aws_port}",
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        return sum(int(attributes.get(name, 0)) for name in names)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def settled(self, timeout_s: float = 120) -> None:
        """Wait until every stream and queue handler has handled all that was sent before this
        call: each has polled and found nothing, in a poll begun after this call and after the
        last batch any of them handled (a handler's batch may send work on to another). Not a
        pause: a slow machine waits longer."""
        sent_before = time.time()

        def activity() -> dict[str, Any]:
            path = self.state_dir / "activity.json"
            return dict(json.loads(path.read_text())) if path.exists() else {}

        def quiet(runners: dict[str, Any]) -> bool:
            last_work = max([sent_before, *(r["busy_until"] for r in runners.values())])
            return bool(runners) and all((r["idle_checked"] or 0) > last_work for r in runners.values())

        wait_for(activity, timeout_s, "every handler to finish what was sent", until=quiet)

    def trigger_schedules(self) -> subprocess.CompletedProcess[str]:
        """`make trigger PORT=...`: run every scheduled handler of this stack now."""
        command = [sys.executable, "-m", "tools.local_stack", "--trigger", "--port", str(self.port)]
        done = subprocess.run(
            [*command, "--state-dir", str(self.state_dir)], cwd=PROJECT, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done


@contextlib.contextmanager
def running_stack(
    log_dir: Path,
    *extra: str,
    state_dir: Path | None = None,
    log_name: str = "stack.log",
    base_path: str | None = None,
    **environment: str,
) -> Iterator[LocalStack]:
    """A stack on free ports, stopped with SIGINT (Ctrl-C) at the end. Its data lives in
    `state_dir` (default: a fresh one in log_dir), so a later stack can restart from it. The
    API is under the stage's path, as API Gateway serves it, unless `base_path` says otherwise
    (`/`: a custom domain mapped at its root)."""
    port, aws_port = free_port(), free_port()
    from tools.gateway import normalized_base

    base = stage_path() if base_path is None else normalized_base(base_path)
    state_dir = state_dir or log_dir / "state"
    # Stage variables exported earlier in this process (the deploy tests build the dev stage's
    # template, which exports its variables) must not override the local stage's.
    from chalicelib.core.settings import FIELDS

    stage_variables = {name.upper() for name in FIELDS}
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k not in stage_variables}
    env.update(environment)
    log_path = log_dir / log_name
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            stack_command(port, aws_port, state_dir, "--snapshot-seconds", "0", "--base-path", base or "/", *extra),
            cwd=PROJECT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    stack = LocalStack(f"http://127.0.0.1:{port}", base, process, log_path, port, aws_port, state_dir)

    def ready() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"the local stack exited early:\n{stack.log()}")
        if not stack.admin_key_path.exists():
            return False
        stack.http.headers["Authorization"] = f"Bearer {stack.admin_key}"
        return stack.get("/counters/ready", timeout=2).status_code == 200

    try:
        wait_for(ready, 90, "the local stack")
        yield stack
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
