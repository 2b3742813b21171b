"""Lambda's and API Gateway's limits, for the local stack and the tests (docs/guarantees.md).

Each function runs under the timeout and memory `.chalice/config.json` gives it, looked up as
Chalice does when it deploys (`stages.<stage>.lambda_functions.<name>`, then the stage, then the
top level, then Chalice's defaults: 60 s and 128 MB).

Timeout. `call_with_deadline` runs an invocation in its own thread and gives up on it at the
deadline: the caller carries on as Lambda does with a timed-out invocation (the batch failed, the
request answered by API Gateway). A thread cannot be killed, so at the deadline `InvocationTimeout`
is also raised inside the invocation's thread (PyThreadState_SetAsyncExc), which ends its work
at its next Python instruction where Lambda would end the process. What differs from Lambda: a
call blocked in C (a sleep, a socket read, a long regex) finishes before the exception lands,
and `finally` blocks and context managers still run. In the tests, moto runs in the caller's
thread, so a handler stopped inside an emulator call could leave that call half done; the local
stack's emulator serves requests on its own threads, which are never stopped.

Memory. Every handler and the API share one Python process here, so what one invocation uses
cannot be measured exactly (tracemalloc counts every thread's allocations and slows each one
8 to 10 times). `call_with_deadline` samples the process's resident size instead and ends an
invocation, as Lambda ends a function out of memory, once the process has grown by more than
the function's memory since the invocation began. That is lenient (Lambda counts the runtime
and the code too, which were there before) and may charge an invocation for another thread's
growth; it catches what matters, an invocation whose work grows with its input past what its
function has (a report run reading a whole day, say).

API Gateway, in front of `api_handler` (`install()`, over Chalice's local gateway):
- a request body over 10 MB is refused with 413, the app not called;
- an event (the JSON sent to the function) over Lambda's 6 MB synchronous payload is not
  invoked (Lambda refuses the invocation: API Gateway answers 500), and a response over 6 MB
  is a function error (502);
- an integration running past 29 s is answered 504; a function whose own timeout is shorter
  fails first (502).
Each answer is the gateway response Tally configures (tools/gateway.py): DEFAULT_4XX or
DEFAULT_5XX, keeping API Gateway's status.
"""

from __future__ import annotations

import contextvars
import ctypes
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from chalice.config import Config
from chalice.constants import DEFAULT_LAMBDA_MEMORY_SIZE, DEFAULT_LAMBDA_TIMEOUT

from tools import stage

log = logging.getLogger("tally.local")
T = TypeVar("T")

API_FUNCTION = "api_handler"  # the function Chalice deploys the routes as
# API Gateway's REST API quotas: "Payload size: 10 MB"; "Integration timeout: 50 milliseconds -
# 29 seconds". Lambda's: "For synchronous invocations, the maximum payload size is 6 MB". The
# documentation writes MB: the smaller reading (10^6 bytes) is taken, so that what passes here
# passes on AWS whichever is meant.
GATEWAY_PAYLOAD_BYTES = 10_000_000
INTEGRATION_TIMEOUT_SECONDS = 29.0
SYNC_PAYLOAD_BYTES = 6_000_000


@dataclass(frozen=True)
class FunctionLimits:
    timeout_s: float = DEFAULT_LAMBDA_TIMEOUT
    memory_mb: int = DEFAULT_LAMBDA_MEMORY_SIZE


def function_limits(stage_name: str, function: str, project: Path = stage.PROJECT) -> FunctionLimits:
    """The timeout and memory `chalice deploy` gives this function in this stage."""
    config = Config(chalice_stage=stage_name, function_name=function, config_from_disk=stage.load_config(project))
    return FunctionLimits(
        timeout_s=config.lambda_timeout or DEFAULT_LAMBDA_TIMEOUT,
        memory_mb=config.lambda_memory_size or DEFAULT_LAMBDA_MEMORY_SIZE,
    )


class InvocationTimeout(BaseException):
    """Raised inside an invocation's thread at its deadline. A BaseException, so that the
    handler's own `except Exception` does not carry on past it (Lambda would have ended it)."""


class InvocationOutOfMemory(BaseException):
    """Raised inside an invocation's thread once it has used more than its function's memory."""


class Abandoned(Exception):
    """What the caller of `call_with_deadline` gets when Lambda would have ended the invocation;
    `thread` is the invocation's, which may still be finishing a blocking call."""

    def __init__(self, message: str, thread: threading.Thread) -> None:
        super().__init__(message)
        self.thread = thread


class TimedOut(Abandoned):
    """The invocation ran past its deadline."""


class OutOfMemory(Abandoned):
    """The invocation grew the process by more than its function's memory."""


MIB = 1 << 20
# How often a running invocation's memory is looked at.
MEMORY_SAMPLE_SECONDS = 0.02
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def resident_bytes() -> int | None:
    """The process's resident size (Linux's /proc), None where it cannot be read."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * _PAGE_BYTES
    except (OSError, IndexError, ValueError):
        return None


def call_with_deadline(call: Callable[[], T], seconds: float, name: str, memory_mb: int | None = None) -> T:
    """`call()` in its own thread (with the caller's context variables), its result or its
    exception; TimedOut once `seconds` pass, OutOfMemory once the process has grown by more than
    `memory_mb` since the call began, the thread then stopped as described above."""
    outcome: dict[str, Any] = {}
    done = threading.Event()
    context = contextvars.copy_context()

    def run() -> None:
        try:
            outcome["value"] = context.run(call)
        except BaseException as exc:  # handed to the caller, or dropped once it gave up
            outcome["error"] = exc
        finally:
            done.set()

    start = resident_bytes() if memory_mb is not None else None
    deadline = time.monotonic() + seconds
    worker = threading.Thread(target=run, name=f"{name}-invocation", daemon=True)
    worker.start()
    while not done.wait(max(0.0, min(MEMORY_SAMPLE_SECONDS, deadline - time.monotonic()))):
        if time.monotonic() >= deadline:
            stop_thread(worker, InvocationTimeout)
            raise TimedOut(f"{name}: Task timed out after {seconds:.2f} seconds", worker)
        if start is not None and memory_mb is not None and (resident_bytes() or start) - start > memory_mb * MIB:
            stop_thread(worker, InvocationOutOfMemory)
            raise OutOfMemory(f"{name}: Runtime exited with error: signal: killed (past {memory_mb} MB)", worker)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]


def stop_thread(thread: threading.Thread, raised: type[BaseException] = InvocationTimeout) -> bool:
    """Raise `raised` in `thread` at its next Python instruction; False if it ended."""
    if thread.ident is None or not thread.is_alive():
        return False
    count = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(raised))
    return bool(count)


# -- API Gateway in front of the API function: Chalice's local gateway --------------------------

# The integration timeout the local gateway applies; tests lower it rather than wait 29 s.
integration_timeout_s = INTEGRATION_TIMEOUT_SECONDS
_installed = False


def install() -> None:
    """Make Chalice's local gateway (the local stack's server, the tests' Client) apply API
    Gateway's and Lambda's limits to each request (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    from chalice import local

    original_init = local.LocalGateway.__init__
    original_handle = local.LocalGateway.handle_request

    def init(self: Any, app_object: Any, config: Config) -> None:
        original_init(self, app_object, config)
        self._app_object = ApiFunction(app_object, api_limits(config))

    def handle_request(self: Any, method: str, path: str, headers: dict[str, str], body: bytes | None) -> Any:
        if body is not None and len(body) > GATEWAY_PAYLOAD_BYTES:  # refused before anything runs
            log.error("api: %s %s: a body of %d bytes, over %d", method, path, len(body), GATEWAY_PAYLOAD_BYTES)
            return gateway_answer("DEFAULT_4XX", 413, headers)
        return original_handle(self, method, path, headers, body)

    local.LocalGateway.__init__ = init  # type: ignore[method-assign]
    local.LocalGateway.handle_request = handle_request  # type: ignore[method-assign]


class ApiFunction:
    """The app as the Lambda function API Gateway invokes for a route: Lambda's payload limits
    on its event and its response, its timeout and API Gateway's integration timeout, each
    failure answered as API Gateway answers it. Everything else is the app's (routes, ...)."""

    def __init__(self, app: Any, limits: FunctionLimits) -> None:
        self.app = app
        self.limits = limits

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        headers = event.get("headers") or {}
        where = f"{event.get('requestContext', {}).get('httpMethod')} {event.get('path')}"
        if payload_size(event) > SYNC_PAYLOAD_BYTES:
            # Lambda refuses the invocation itself, which API Gateway answers 500.
            log.error("api: %s: an event over Lambda's %d bytes: not invoked", where, SYNC_PAYLOAD_BYTES)
            return gateway_answer("DEFAULT_5XX", 500, headers)
        context._max_runtime = int(self.limits.timeout_s * 1000)
        context.memory_limit_in_mb = self.limits.memory_mb
        deadline = min(integration_timeout_s, self.limits.timeout_s)
        try:
            response = call_with_deadline(
                lambda: self.app(event, context), deadline, API_FUNCTION, self.limits.memory_mb
            )
        except OutOfMemory:
            log.error("api: %s: past the function's %d MB", where, self.limits.memory_mb)
            return gateway_answer("DEFAULT_5XX", 502, headers)  # a function error
        except TimedOut:
            # Past the integration timeout API Gateway gives up (504); a function whose own
            # timeout comes first fails, which API Gateway answers 502.
            log.error("api: %s: no answer within %.2f s", where, deadline)
            return gateway_answer("DEFAULT_5XX", 504 if deadline >= integration_timeout_s else 502, headers)
        if payload_size(response) > SYNC_PAYLOAD_BYTES:
            # The function ran and Lambda refused its answer: a function error, answered 502.
            log.error("api: %s: a response over Lambda's %d bytes", where, SYNC_PAYLOAD_BYTES)
            return gateway_answer("DEFAULT_5XX", 502, headers)
        return response


def api_limits(config: Config) -> FunctionLimits:
    """The API function's limits in the gateway's stage."""
    scoped = config.scope(config.chalice_stage, API_FUNCTION)
    return FunctionLimits(
        timeout_s=scoped.lambda_timeout or DEFAULT_LAMBDA_TIMEOUT,
        memory_mb=scoped.lambda_memory_size or DEFAULT_LAMBDA_MEMORY_SIZE,
    )


def payload_size(value: Any) -> int:
    """Bytes of the JSON Lambda carries for an event or a response."""
    return len(json.dumps(value, separators=(",", ":"), default=str).encode("utf-8"))


def records_within_payload(empty_event: dict[str, Any], records: list[dict[str, Any]]) -> int:
    """How many of `records`, from the first (one at least), fit in one invocation's event
    (`empty_event` holding an empty list where they go): "Lambda passes all of the records in
    the batch to the function in a single call, up to the payload limit for synchronous
    invocation (6 MB)" (CreateEventSourceMapping, BatchSize)."""
    size, count = payload_size(empty_event), 0
    for record in records:
        size += payload_size(record) + (1 if count else 0)  # and the comma before it
        if count and size > SYNC_PAYLOAD_BYTES:
            break
        count += 1
    return count


def gateway_answer(response_type: str, status: int, headers: dict[str, str]) -> dict[str, Any]:
    """A DEFAULT_4XX/5XX gateway response: Tally's body, API Gateway's status kept."""
    from tools import gateway

    answer = gateway.local_answer(response_type, headers)
    answer["statusCode"] = status
    return answer
