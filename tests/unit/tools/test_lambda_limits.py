"""Lambda's limits in the local stack: each function's configured timeout and memory, and an
invocation abandoned, and its work stopped, at its deadline."""

from __future__ import annotations

import contextvars
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tools import lambda_limits, stage
from tools.lambda_limits import MIB, FunctionLimits, OutOfMemory, TimedOut, call_with_deadline, function_limits


def project_with(config: dict[str, Any], tmp_path: Path) -> Path:
    (tmp_path / ".chalice").mkdir(parents=True)
    (tmp_path / ".chalice" / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_given_limits_at_each_level_when_looked_up_then_the_function_the_stage_the_top_then_chalices_defaults(
    tmp_path: Path,
) -> None:
    project = project_with(
        {
            "lambda_memory_size": 256,
            "stages": {
                "s": {
                    "lambda_timeout": 45,
                    "lambda_functions": {"fast": {"lambda_timeout": 3, "lambda_memory_size": 1024}},
                },
                "bare": {},
            },
        },
        tmp_path,
    )

    assert function_limits("s", "fast", project) == FunctionLimits(timeout_s=3, memory_mb=1024)
    assert function_limits("s", "other", project) == FunctionLimits(timeout_s=45, memory_mb=256)
    assert function_limits("bare", "other", project) == FunctionLimits(timeout_s=60, memory_mb=256)
    assert function_limits("bare", "other", project_with({"stages": {"bare": {}}}, tmp_path / "x")) == (
        FunctionLimits(timeout_s=60, memory_mb=128)
    )


def test_given_the_local_stage_then_every_function_has_the_limits_it_is_deployed_with() -> None:
    """The local stack runs the `local` stage: it mirrors a deploy only if each function's
    timeout and memory there are those of the deployed stages."""
    config = stage.load_config()
    deployed = [name for name in config["stages"] if name != "local"]
    functions = {f for name in deployed for f in config["stages"][name].get("lambda_functions", {})}

    assert "run_scheduled_report" in functions
    for name in deployed:
        for function in functions:
            assert function_limits("local", function) == function_limits(name, function), (name, function)


def test_given_a_call_past_its_deadline_then_timed_out_at_the_deadline_and_its_work_stops() -> None:
    progress: list[int] = []
    ended = threading.Event()

    def busy() -> None:
        try:
            for step in range(10**9):  # pure Python: the injected exception lands at once
                progress.append(step)
                time.sleep(0.001)
        finally:
            ended.set()

    began = time.monotonic()
    with pytest.raises(TimedOut):
        call_with_deadline(busy, 0.1, "busy")
    assert time.monotonic() - began < 0.5
    assert ended.wait(1)
    reached = len(progress)
    time.sleep(0.05)
    assert len(progress) == reached  # nothing runs after the deadline


def test_given_a_call_blocked_past_its_deadline_then_answered_at_the_deadline_and_nothing_after_the_block_runs() -> (
    None
):
    """A blocking call finishes first (what differs from Lambda), but the work after it does not run."""
    after = threading.Event()

    def blocked() -> None:
        time.sleep(0.3)
        after.set()

    began = time.monotonic()
    with pytest.raises(TimedOut):
        call_with_deadline(blocked, 0.05, "blocked")
    assert time.monotonic() - began < 0.25
    time.sleep(0.5)
    assert not after.is_set()


def test_given_a_call_that_grows_the_process_past_its_memory_then_out_of_memory_and_its_work_stops() -> None:
    after = threading.Event()

    def greedy() -> None:
        held = b"x" * (96 * MIB)  # written, so resident
        for _ in range(500):
            time.sleep(0.01)
        after.set()
        del held

    began = time.monotonic()
    with pytest.raises(OutOfMemory):
        call_with_deadline(greedy, 10, "greedy", memory_mb=64)
    assert time.monotonic() - began < 3
    time.sleep(0.1)
    assert not after.is_set()


def test_given_a_call_within_its_memory_then_its_result() -> None:
    assert call_with_deadline(lambda: len(b"x" * (16 * MIB)), 10, "modest", memory_mb=64) == 16 * MIB


def test_given_a_call_within_its_deadline_then_its_result_or_its_exception_and_the_callers_context() -> None:
    request = contextvars.ContextVar("request", default="none")
    request.set("r-1")

    assert call_with_deadline(lambda: request.get(), 1, "ok") == "r-1"
    with pytest.raises(KeyError):
        call_with_deadline(lambda: {}["missing"], 1, "fails")


def test_given_the_stop_of_a_thread_that_ended_then_nothing_is_raised() -> None:
    thread = threading.Thread(target=lambda: None)
    thread.start()
    thread.join()

    assert lambda_limits.stop_thread(thread) is False
