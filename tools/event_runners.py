"""Lambda's event-source side, for the local stack.

Each runner feeds one handler that app.py registered (found in `app.event_sources`) with
Lambda-shaped events read from the emulator, following Lambda's delivery rules:
- DynamoDB streams: batches per shard in order; a batch whose handler raises (or, the mapping
  having a tumbling window, answers without a `state`) is delivered again, whole, before
  anything after it. Events carry what Lambda sends with a tumbling window: `shardId`,
  `window`, `state`, `isFinalInvokeForWindow`, `isWindowTerminatedEarly`. moto has one shard
  per table; `split` > 1 delivers it as that many shards, an item's records always through the
  same one (AWS orders records per item and per shard, not per partition key: an adaptive
  split sends one partition key's items through several), the later shards first.
- SQS: a batch is deleted only when the handler returns; otherwise its messages come back
  after the queue's visibility timeout (and go to the dead-letter queue after maxReceiveCount).
- Schedules: run on their rate or cron expression, retried twice on failure like an
  asynchronous invocation; `trigger()` runs one now.
Each invocation runs under its function's timeout (tools/lambda_limits.py): one still running
at its deadline is abandoned and counts as failed, as Lambda counts a timed-out invocation. A
stream or queue batch holds no more records than fit in Lambda's 6 MB synchronous payload.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from tools.lambda_limits import (
    SYNC_PAYLOAD_BYTES,
    Abandoned,
    FunctionLimits,
    call_with_deadline,
    records_within_payload,
)

log = logging.getLogger("tally.local")
Handler = Callable[[dict[str, Any], Any], Any]


class LambdaContext:
    """The attributes handlers commonly read from Lambda's context object."""

    def __init__(self, name: str, limits: FunctionLimits) -> None:
        self.function_name = name
        self.aws_request_id = str(uuid.uuid4())
        self.memory_limit_in_mb = limits.memory_mb
        self._deadline = time.monotonic() + limits.timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def invoke(
    name: str,
    handler: Handler,
    event: dict[str, Any],
    size: int,
    limits: FunctionLimits,
    needs_state: bool = False,
) -> bool:
    """Call the handler as Lambda would, under its timeout and memory; True when it returned in time (with
    a `state`, when the mapping has a tumbling window: Lambda counts an answer without one as a
    failed invocation). It logs its own line (app.py's telemetry middleware): the runner adds
    none, except for a timeout or running out of memory, which Lambda logs itself."""
    wait_for_abandoned(name)
    context = LambdaContext(name, limits)
    try:
        response = call_with_deadline(lambda: handler(event, context), limits.timeout_s, name, limits.memory_mb)
    except Abandoned as exc:  # timed out or out of memory
        log.error("%s (batch of %d abandoned)", exc, size)
        _abandoned[name] = exc.thread
        return False
    except Exception:  # a handler failure is an outcome, already logged, not a crash of the runner
        log.debug("%s: batch of %d failed", name, size, exc_info=True)
        return False
    if needs_state and not (isinstance(response, dict) and isinstance(response.get("state"), dict)):
        log.warning("%s: answer without a state: the batch counts as failed", name)
        return False
    return True


# Per function, the thread of its last abandoned (timed-out or out-of-memory) invocation: stopped, but perhaps still inside
# a blocking call.
_abandoned: dict[str, threading.Thread] = {}


def wait_for_abandoned(name: str) -> None:
    """Lambda retries a batch in a new execution environment once the timed-out one is gone:
    the next invocation waits until the abandoned thread has really ended, so that two never
    work on one shard's batches at once."""
    thread = _abandoned.pop(name, None)
    while thread is not None and thread.is_alive():
        thread.join(10)
        if thread.is_alive():
            log.warning("%s: the invocation that timed out is still in a blocking call; waiting for it", name)


class Runner(threading.Thread):
    def __init__(self, name: str, stop: threading.Event, limits: FunctionLimits | None = None) -> None:
        super().__init__(name=name, daemon=True)
        self.stop = stop
        self.limits = limits or FunctionLimits()
        # Wall-clock seconds: when the latest step that found nothing to handle began (None while
        # there is work), and when the last step that handled something ended. A test learns
        # from them that everything sent before a moment has been handled.
        self.idle_checked: float | None = None
        self.busy_until = 0.0

    def run(self) -> None:
        while not self.stop.is_set():
            began = time.time()
            try:
                busy = self.step()
            except Exception:  # keep polling through emulator hiccups, as Lambda's pollers do
                log.exception("%s: poller error", self.name)
                busy = False
            if busy:
                self.idle_checked, self.busy_until = None, time.time()
            else:
                self.idle_checked = None if self.waiting() else began
            if not busy:
                self.stop.wait(0.2)

    def step(self) -> bool:
        raise NotImplementedError

    def waiting(self) -> bool:
        """Whether something received is still to be handled (a batch waiting for its retry)."""
        return False

    def activity(self) -> dict[str, float | None]:
        return {"idle_checked": self.idle_checked, "busy_until": self.busy_until}


class StreamRunner(Runner):
    def __init__(
        self,
        name: str,
        handler: Handler,
        streams: Any,
        stream_arn: str,
        batch_size: int,
        starting_position: str,
        region: str,
        stop: threading.Event,
        split: int = 1,
        window_seconds: int = 60,
        limits: FunctionLimits | None = None,
    ) -> None:
        super().__init__(name, stop, limits)
        self.handler = handler
        self.streams = streams
        self.stream_arn = stream_arn
        self.batch_size = min(batch_size, 1000)
        self.starting_position = starting_position
        self.region = region
        self.split = max(1, split)
        self.window_seconds = window_seconds
        self.iterators: dict[str, str | None] = {}
        # Records read but not yet acknowledged, per delivered shard (moto's shard, or a part of it).
        self.pending: dict[str, list[dict[str, Any]]] = {}
        self.failures: dict[str, int] = {}
        self.next_try: dict[str, float] = {}
        self.last_describe = 0.0
        # Set while every shard has been read to its end and applied: a clean stop waits for it.
        self.caught_up = threading.Event()

    def shards_of(self, shard_id: str) -> list[str]:
        """The shards one of moto's is delivered as, the later ones first."""
        if self.split == 1:
            return [shard_id]
        return [f"{shard_id}-part{k}" for k in reversed(range(self.split))]

    def part_of(self, shard_id: str, record: dict[str, Any]) -> str:
        if self.split == 1:
            return shard_id
        keys = record["dynamodb"].get("Keys", {})
        item = repr(sorted((k, repr(v)) for k, v in keys.items()))
        return f"{shard_id}-part{zlib.crc32(item.encode()) % self.split}"

    def step(self) -> bool:
        if time.monotonic() - self.last_describe > 5 or not self.iterators:
            self.last_describe = time.monotonic()
            shards = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]["Shards"]
            for shard in shards:
                if shard["ShardId"] not in self.iterators:
                    self.iterators[shard["ShardId"]] = self.streams.get_shard_iterator(
                        StreamArn=self.stream_arn,
                        ShardId=shard["ShardId"],
                        ShardIteratorType=self.starting_position,
                    )["ShardIterator"]
        busy = False
        behind = False
        for shard_id, iterator in list(self.iterators.items()):
            parts = self.shards_of(shard_id)
            if iterator is not None and not any(self.pending.get(p) for p in parts):
                response = self.streams.get_records(ShardIterator=iterator, Limit=self.batch_size)
                self.iterators[shard_id] = response.get("NextShardIterator")
                for record in response.get("Records", []):
                    self.pending.setdefault(self.part_of(shard_id, record), []).append(self._lambda_record(record))
            for part in parts:  # each part in its own order; the later parts go first
                queue = self.pending.get(part) or []
                behind = behind or bool(queue)
                if not queue or time.monotonic() < self.next_try.get(part, 0):
                    continue
                busy = True
                batch = queue[: self.batch_size]
                batch = batch[: records_within_payload(self._event(part, []), batch)]
                if invoke(self.name, self.handler, self._event(part, batch), len(batch), self.limits, needs_state=True):
                    self.pending[part] = queue[len(batch) :]
                    self.failures[part] = 0
                else:
                    # Same batch again, after a growing pause: nothing later in the shard goes first.
                    self.failures[part] = self.failures.get(part, 0) + 1
                    self.next_try[part] = time.monotonic() + min(2 ** self.failures[part], 30)
        if behind:
            self.caught_up.clear()
        else:
            self.caught_up.set()
        return busy

    def waiting(self) -> bool:
        return not self.caught_up.is_set()

    def _event(self, shard_id: str, batch: list[dict[str, Any]]) -> dict[str, Any]:
        """Lambda's event for a mapping with a tumbling window (Tally's)."""
        now = int(time.time())
        start = now - now % self.window_seconds
        iso = "%Y-%m-%dT%H:%M:%SZ"
        return {
            "Records": batch,
            "window": {
                "start": datetime.fromtimestamp(start, UTC).strftime(iso),
                "end": datetime.fromtimestamp(start + self.window_seconds, UTC).strftime(iso),
            },
            "state": {},
            "shardId": shard_id,
            "eventSourceARN": self.stream_arn,
            "isFinalInvokeForWindow": False,
            "isWindowTerminatedEarly": False,
        }

    def _lambda_record(self, record: dict[str, Any]) -> dict[str, Any]:
        ddb = dict(record["dynamodb"])
        created = ddb.get("ApproximateCreationDateTime")
        if isinstance(created, datetime):
            ddb["ApproximateCreationDateTime"] = created.timestamp()
        return {
            "eventID": record["eventID"],
            "eventName": record["eventName"],
            "eventVersion": record.get("eventVersion", "1.1"),
            "eventSource": "aws:dynamodb",
            "awsRegion": self.region,
            "dynamodb": ddb,
            "eventSourceARN": self.stream_arn,
        }


class SqsRunner(Runner):
    def __init__(
        self,
        name: str,
        handler: Handler,
        sqs: Any,
        queue_name: str,
        batch_size: int,
        batching_window_s: float,
        region: str,
        stop: threading.Event,
        limits: FunctionLimits | None = None,
    ) -> None:
        super().__init__(name, stop, limits)
        self.handler = handler
        self.sqs = sqs
        self.queue_url = sqs.get_queue_url(QueueName=queue_name)["QueueUrl"]
        self.queue_arn = sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        self.batch_size = batch_size
        self.batching_window_s = batching_window_s
        self.region = region
        # Received messages left out of a batch by the 6 MB payload limit: the next batch's first.
        self.carry: list[dict[str, Any]] = []

    def waiting(self) -> bool:
        return bool(self.carry)

    def step(self) -> bool:
        messages, self.carry = self.carry, []
        deadline = time.monotonic() + self.batching_window_s
        while (
            len(messages) < self.batch_size
            and sum(len(m["Body"]) for m in messages) < SYNC_PAYLOAD_BYTES
            and not self.stop.is_set()
        ):
            response = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=min(10, self.batch_size - len(messages)),
                WaitTimeSeconds=1 if not messages else 0,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
            received = response.get("Messages", [])
            messages.extend(received)
            if not received and (not messages or time.monotonic() >= deadline):
                break
            if messages and time.monotonic() >= deadline and len(received) < 10:
                break
        if not messages:
            return False
        records = [self._lambda_record(m) for m in messages]
        fitting = records_within_payload({"Records": []}, records)
        messages, self.carry, records = messages[:fitting], messages[fitting:], records[:fitting]
        event = {"Records": records}
        if invoke(self.name, self.handler, event, len(messages), self.limits):
            for start in range(0, len(messages), 10):
                self.sqs.delete_message_batch(
                    QueueUrl=self.queue_url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                        for i, m in enumerate(messages[start : start + 10])
                    ],
                )
        return True

    def _lambda_record(self, message: dict[str, Any]) -> dict[str, Any]:
        return {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": message["Body"],
            "attributes": message.get("Attributes", {}),
            "messageAttributes": message.get("MessageAttributes", {}),
            "md5OfBody": message.get("MD5OfBody", ""),
            "eventSource": "aws:sqs",
            "eventSourceARN": self.queue_arn,
            "awsRegion": self.region,
        }


class ScheduleRunner(Runner):
    def __init__(
        self,
        name: str,
        handler: Handler,
        expression: str,
        region: str,
        stop: threading.Event,
        limits: FunctionLimits | None = None,
    ) -> None:
        super().__init__(name, stop, limits)
        self.handler = handler
        self.expression = expression
        self.region = region
        self.due = next_run(expression, datetime.now(UTC))
        self.requested = threading.Event()

    def trigger(self) -> None:
        self.requested.set()

    def step(self) -> bool:
        now = datetime.now(UTC)
        if not self.requested.is_set() and now < self.due:
            return False
        self.requested.clear()
        if now >= self.due:
            self.due = next_run(self.expression, now)
        event = {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": "123456789012",
            "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": self.region,
            "resources": [f"arn:aws:events:{self.region}:123456789012:rule/{self.name}"],
            "detail": {},
        }
        for attempt in range(3):  # an asynchronous invocation is tried up to three times
            if invoke(self.name, self.handler, event, 1, self.limits) or self.stop.wait(5 * (attempt + 1)):
                break
        return True


def next_run(expression: str, after: datetime) -> datetime:
    """Next time a `rate(...)` or `cron(...)` EventBridge expression fires after `after`."""
    expression = expression.strip()
    if expression.startswith("rate(") and expression.endswith(")"):
        value, unit = expression[5:-1].split()
        seconds = int(value) * {"minute": 60, "hour": 3600, "day": 86400}[unit.rstrip("s")]
        return after + timedelta(seconds=seconds)
    if expression.startswith("cron(") and expression.endswith(")"):
        fields = expression[5:-1].split()
        minute = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
        for _ in range(366 * 24 * 60):
            if _cron_matches(fields, minute):
                return minute
            minute += timedelta(minutes=1)
    raise ValueError(f"unsupported schedule expression: {expression}")


def _cron_matches(fields: list[str], moment: datetime) -> bool:
    minutes, hours, day, month, weekday, year = fields
    # EventBridge numbers weekdays 1-7 from Sunday.
    values = [moment.minute, moment.hour, moment.day, moment.month, moment.isoweekday() % 7 + 1, moment.year]
    return all(_field_matches(f, v) for f, v in zip([minutes, hours, day, month, weekday, year], values))


def _field_matches(field: str, value: int) -> bool:
    for part in field.split(","):
        if part in ("*", "?"):
            return True
        base, _, step = part.partition("/")
        if base in ("*", "?"):
            low, high = 0, 10_000
        elif "-" in base:
            low, high = (int(x) for x in base.split("-"))
        else:
            low = int(base)
            high = low if not step else 10_000
        if low <= value <= high and (value - low) % int(step or 1) == 0:
            return True
    return False
