"""Lambda's and API Gateway's limits in the local stack (tools/lambda_limits.py), with fake
handlers on moto: an invocation past its timeout is abandoned and its batch comes back as
Lambda would deliver it again; the gateway refuses and answers as API Gateway does."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from chalice import Chalice, Response
from chalice.test import Client
from moto import mock_aws

from tools import lambda_limits
from tools.event_runners import ScheduleRunner, SqsRunner, StreamRunner
from tools.lambda_limits import GATEWAY_PAYLOAD_BYTES, SYNC_PAYLOAD_BYTES, FunctionLimits, payload_size

REGION = "us-east-1"
LIMITS = FunctionLimits(timeout_s=0.2, memory_mb=256)


class SlowFirstHandler:
    """Runs past the timeout on its first invocation, answers at once after that."""

    def __init__(self, answer: Any = None) -> None:
        self.answer = answer
        self.seen: list[dict[str, Any]] = []
        self.finished_late = threading.Event()

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        self.seen.append(
            {
                "records": len(event["Records"]),
                "remaining_ms": context.get_remaining_time_in_millis(),
                "memory_mb": context.memory_limit_in_mb,
            }
        )
        if len(self.seen) == 1:
            time.sleep(0.5)
            self.finished_late.set()  # the work after the deadline: never reached
        return self.answer


def step_until(step: Callable[[], Any], done: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "not done in time"
        step()
        time.sleep(0.05)


@pytest.fixture
def moto() -> Iterator[None]:
    with mock_aws():
        yield


def test_given_a_handler_past_its_timeout_when_polling_sqs_then_the_batch_comes_back_after_the_visibility_timeout(
    moto: None,
) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="limits", Attributes={"VisibilityTimeout": "1"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m-1")
    handler = SlowFirstHandler()
    runner = SqsRunner("on_limits", handler, sqs, "limits", 10, 0, REGION, threading.Event(), limits=LIMITS)

    began = time.monotonic()
    assert runner.step() is True
    abandoned_after = time.monotonic() - began
    left = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (left["ApproximateNumberOfMessages"], left["ApproximateNumberOfMessagesNotVisible"]) == ("0", "1")
    step_until(runner.step, lambda: len(handler.seen) == 2, 10)

    assert abandoned_after < 1.2  # the receive's long poll (1 s) plus the 0.2 s timeout, not the 0.5 s sleep
    left = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (left["ApproximateNumberOfMessages"], left["ApproximateNumberOfMessagesNotVisible"]) == ("0", "0")
    assert [s["records"] for s in handler.seen] == [1, 1]
    assert all(s["memory_mb"] == 256 and 0 < s["remaining_ms"] <= 200 for s in handler.seen)
    time.sleep(0.5)
    assert not handler.finished_late.is_set()


def test_given_a_handler_that_outgrows_its_memory_when_polling_sqs_then_abandoned_and_its_batch_comes_back(
    moto: None,
) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="memory", Attributes={"VisibilityTimeout": "1"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m-1")
    calls: list[int] = []
    finished_late = threading.Event()

    def greedy_first(event: dict[str, Any], context: Any) -> None:
        calls.append(len(event["Records"]))
        if len(calls) == 1:
            held = b"x" * (96 * lambda_limits.MIB)  # past the function's 64 MB
            for _ in range(500):  # stopped at the next sample, within the timeout
                time.sleep(0.01)
            finished_late.set()
            del held

    limits = FunctionLimits(timeout_s=10, memory_mb=64)
    runner = SqsRunner("on_memory", greedy_first, sqs, "memory", 10, 0, REGION, threading.Event(), limits=limits)

    began = time.monotonic()
    assert runner.step() is True
    abandoned_after = time.monotonic() - began
    step_until(runner.step, lambda: len(calls) == 2, 10)

    assert abandoned_after < 3  # not the handler's 5 s, nor the 10 s timeout
    assert not finished_late.is_set()
    left = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (left["ApproximateNumberOfMessages"], left["ApproximateNumberOfMessagesNotVisible"]) == ("0", "0")


def test_given_a_handler_blocked_past_its_timeout_when_its_batch_comes_back_then_it_waits_for_the_abandoned_one(
    moto: None,
) -> None:
    """Lambda retries in a new execution environment: never two invocations at once on one batch."""
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="blocked", Attributes={"VisibilityTimeout": "1"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m-1")
    started: list[float] = []
    blocked_until: list[float] = []

    def handler(event: dict[str, Any], context: Any) -> None:
        started.append(time.monotonic())
        if len(started) == 1:
            try:
                time.sleep(2)  # blocked in C past the 0.2 s timeout and the 1 s visibility timeout
            finally:
                blocked_until.append(time.monotonic())

    runner = SqsRunner("on_blocked", handler, sqs, "blocked", 10, 0, REGION, threading.Event(), limits=LIMITS)
    step_until(runner.step, lambda: len(started) == 2, 10)

    assert started[1] >= blocked_until[0]
    assert (
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"][
            "ApproximateNumberOfMessages"
        ]
        == "0"
    )


class OneShardStream:
    """A DynamoDB stream with one shard holding `records` (moto's in-process mock has no
    DescribeStream): what the stream runner reads."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.records = records

    def describe_stream(self, StreamArn: str) -> dict[str, Any]:
        return {"StreamDescription": {"Shards": [{"ShardId": "shard-0"}]}}

    def get_shard_iterator(self, **_: Any) -> dict[str, str]:
        return {"ShardIterator": "0"}

    def get_records(self, ShardIterator: str, Limit: int) -> dict[str, Any]:
        start = int(ShardIterator)
        batch = self.records[start : start + Limit]
        return {"Records": batch, "NextShardIterator": str(start + len(batch))}


def stream_record(key: str) -> dict[str, Any]:
    return {
        "eventID": f"e-{key}",
        "eventName": "INSERT",
        "dynamodb": {"Keys": {"pk": {"S": key}}, "NewImage": {"pk": {"S": key}}, "SequenceNumber": key},
    }


def test_given_a_handler_past_its_timeout_when_reading_a_stream_then_the_same_batch_is_retried_then_succeeds() -> None:
    handler = SlowFirstHandler(answer={"state": {}})
    stream = OneShardStream([stream_record("a"), stream_record("b")])
    arn = "arn:aws:dynamodb:us-east-1:123456789012:table/limits/stream/1"
    runner = StreamRunner(
        "on_limits", handler, stream, arn, 100, "TRIM_HORIZON", REGION, threading.Event(), limits=LIMITS
    )

    began = time.monotonic()
    runner.step()
    abandoned_after = time.monotonic() - began
    assert runner.waiting()  # the batch is kept for its retry, nothing after it goes first
    step_until(runner.step, lambda: not runner.waiting(), 10)

    assert abandoned_after < 0.45
    assert [s["records"] for s in handler.seen] == [2, 2]
    assert all(s["memory_mb"] == 256 and 0 < s["remaining_ms"] <= 200 for s in handler.seen)
    time.sleep(0.5)
    assert not handler.finished_late.is_set()


class Recorder:
    """Takes every batch; keeps each event's record count and payload size."""

    def __init__(self, answer: Any = None) -> None:
        self.answer = answer
        self.batches: list[tuple[int, int]] = []

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        self.batches.append((len(event["Records"]), payload_size(event)))
        return self.answer


RECORD_BYTES = 900_000  # six fit in 6 MB, seven do not
# What the 6 MB tests check is the batches, not the timeout: measuring 5 MB of records takes
# longer than LIMITS' 0.2 s on a busy machine, and a batch that times out is only sent again.
LARGE_LIMITS = FunctionLimits(timeout_s=60, memory_mb=LIMITS.memory_mb)


def test_given_messages_of_900_kb_when_polling_sqs_then_each_batch_stops_at_lambdas_6_mb(moto: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="large")["QueueUrl"]
    for i in range(8):
        sqs.send_message(QueueUrl=url, MessageBody=str(i) * RECORD_BYTES)
    handler = Recorder()
    runner = SqsRunner("on_large", handler, sqs, "large", 10, 0, REGION, threading.Event(), limits=LARGE_LIMITS)

    step_until(runner.step, lambda: sum(n for n, _ in handler.batches) == 8, 10)

    assert [n for n, _ in handler.batches] == [6, 2]
    assert all(size <= SYNC_PAYLOAD_BYTES for _, size in handler.batches)
    assert not runner.waiting()
    assert (
        sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"])["Attributes"][
            "ApproximateNumberOfMessagesNotVisible"
        ]
        == "0"
    )


def test_given_stream_records_of_900_kb_then_each_batch_stops_at_lambdas_6_mb_in_order() -> None:
    records = [stream_record(str(i)) for i in range(8)]
    for record in records:
        record["dynamodb"]["NewImage"]["blob"] = {"S": "x" * RECORD_BYTES}
    handler = Recorder(answer={"state": {}})
    arn = "arn:aws:dynamodb:us-east-1:123456789012:table/large/stream/1"
    runner = StreamRunner(
        "on_large",
        handler,
        OneShardStream(records),
        arn,
        100,
        "TRIM_HORIZON",
        REGION,
        threading.Event(),
        limits=LARGE_LIMITS,
    )

    step_until(runner.step, lambda: sum(n for n, _ in handler.batches) == 8, 10)

    assert [n for n, _ in handler.batches] == [6, 2]
    assert all(size <= SYNC_PAYLOAD_BYTES for _, size in handler.batches)


class NoPause(threading.Event):
    """A stop event whose pauses between retries end at once."""

    def wait(self, timeout: float | None = None) -> bool:
        return False


def test_given_a_scheduled_handler_past_its_timeout_then_it_is_retried_as_an_asynchronous_invocation() -> None:
    seen: list[int] = []
    finished_late = threading.Event()

    def handler(event: dict[str, Any], context: Any) -> None:
        seen.append(context.memory_limit_in_mb)
        if len(seen) == 1:
            time.sleep(0.5)
            finished_late.set()

    runner = ScheduleRunner("run_limits", handler, "rate(1 hour)", REGION, NoPause(), limits=LIMITS)
    runner.trigger()

    assert runner.step() is True
    assert seen == [256, 256]
    time.sleep(0.5)
    assert not finished_late.is_set()


# -- the API: a small app behind Chalice's local gateway, as the local stack serves Tally --------

ran: list[str] = []


def small_app() -> Chalice:
    app = Chalice("limits")

    @app.route("/echo", methods=["POST"])
    def echo() -> dict[str, int]:
        ran.append("echo")
        return {"size": len(app.current_request.raw_body)}

    @app.route("/sized/{size}")
    def sized(size: str) -> Response:
        return Response(body="x" * int(size), headers={"Content-Type": "text/plain"}, status_code=200)

    @app.route("/slow/{seconds}")
    def slow(seconds: str) -> dict[str, bool]:
        time.sleep(float(seconds))
        ran.append("slow finished")
        return {"done": True}

    @app.route("/held/{mb}")
    def held(mb: str) -> dict[str, int]:
        block = b"x" * (int(mb) * lambda_limits.MIB)
        time.sleep(0.2)  # long enough to be sampled
        ran.append("held")
        return {"held": len(block)}

    @app.route("/context")
    def context() -> dict[str, int]:
        lambda_context = app.lambda_context
        return {
            "remaining_ms": lambda_context.get_remaining_time_in_millis(),
            "memory_mb": lambda_context.memory_limit_in_mb,
        }

    return app


def client_for(tmp_path: Path, api_handler: dict[str, int]) -> Client:
    (tmp_path / ".chalice").mkdir()
    config = {
        "version": "2.0",
        "app_name": "limits",
        "stages": {"t": {"lambda_functions": {"api_handler": api_handler}}},
    }
    (tmp_path / ".chalice" / "config.json").write_text(json.dumps(config))
    ran.clear()
    return Client(small_app(), stage_name="t", project_dir=str(tmp_path))


def json_body(size: int) -> bytes:
    """A JSON string of exactly `size` bytes."""
    return b'"' + b"x" * (size - 2) + b'"'


def answer(response: Any) -> tuple[int, str]:
    return response.status_code, json.loads(response.body)["Code"]


def test_given_a_route_then_its_context_reports_the_api_functions_configured_timeout_and_memory(
    tmp_path: Path,
) -> None:
    client = client_for(tmp_path, {"lambda_timeout": 20, "lambda_memory_size": 256})

    response = client.http.get("/context")

    assert response.status_code == 200
    reported = json.loads(response.body)
    assert reported["memory_mb"] == 256
    assert 19_000 < reported["remaining_ms"] <= 20_000


def test_given_a_body_over_10_mb_then_413_and_the_function_is_not_called(tmp_path: Path) -> None:
    client = client_for(tmp_path, {"lambda_timeout": 20})
    headers = {"Content-Type": "application/json"}

    over = client.http.post("/echo", body=json_body(GATEWAY_PAYLOAD_BYTES + 1), headers=headers)
    at = client.http.post("/echo", body=json_body(GATEWAY_PAYLOAD_BYTES), headers=headers)

    assert answer(over) == (413, "BadRequestError")
    # 10 MB passes API Gateway, but its event is over Lambda's 6 MB: Lambda refuses the invocation.
    assert answer(at) == (500, "InternalServerError")
    assert ran == []


def test_given_an_event_over_6_mb_then_500_and_under_it_the_function_answers(tmp_path: Path) -> None:
    client = client_for(tmp_path, {"lambda_timeout": 20})
    headers = {"Content-Type": "application/json"}

    under = client.http.post("/echo", body=json_body(SYNC_PAYLOAD_BYTES - 4096), headers=headers)
    over = client.http.post("/echo", body=json_body(SYNC_PAYLOAD_BYTES + 1), headers=headers)

    assert under.status_code == 200 and json.loads(under.body) == {"size": SYNC_PAYLOAD_BYTES - 4096}
    assert answer(over) == (500, "InternalServerError")
    assert ran == ["echo"]


def test_given_a_response_over_6_mb_then_502_as_api_gateway_answers_a_function_error(tmp_path: Path) -> None:
    client = client_for(tmp_path, {"lambda_timeout": 20})

    under = client.http.get(f"/sized/{SYNC_PAYLOAD_BYTES - 4096}")
    over = client.http.get(f"/sized/{SYNC_PAYLOAD_BYTES + 1}")

    assert under.status_code == 200 and len(under.body) == SYNC_PAYLOAD_BYTES - 4096
    assert answer(over) == (502, "InternalServerError")


def test_given_a_route_past_the_integration_timeout_then_504_at_the_timeout_and_its_work_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = client_for(tmp_path, {"lambda_timeout": 20})
    monkeypatch.setattr(lambda_limits, "integration_timeout_s", 0.2)

    began = time.monotonic()
    slow = client.http.get("/slow/0.6")
    took = time.monotonic() - began
    fast = client.http.get("/slow/0")

    assert answer(slow) == (504, "InternalServerError")
    assert took < 0.5
    assert fast.status_code == 200
    time.sleep(0.6)
    assert ran == ["slow finished"]  # the fast one's: the slow one never finished


def test_given_a_function_timeout_shorter_than_the_integrations_then_502_when_it_runs_past_it(
    tmp_path: Path,
) -> None:
    client = client_for(tmp_path, {"lambda_timeout": 1})

    response = client.http.get("/slow/1.4")

    assert answer(response) == (502, "InternalServerError")
    assert lambda_limits.integration_timeout_s == lambda_limits.INTEGRATION_TIMEOUT_SECONDS == 29.0


def test_given_a_route_that_outgrows_the_functions_memory_then_502_and_within_it_answered(tmp_path: Path) -> None:
    client = client_for(tmp_path, {"lambda_memory_size": 64})

    past = client.http.get("/held/96")
    within = client.http.get("/held/8")

    assert answer(past) == (502, "InternalServerError")
    assert within.status_code == 200 and ran == ["held"]  # the first never finished
