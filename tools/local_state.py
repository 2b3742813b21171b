"""The local stack's data on disk: a snapshot of the emulator's tables, queues and buckets.

moto keeps everything in memory. Its only built-in way to outlive a restart is the recorder,
which logs every HTTP request and replays them all on start; replaying is not a restore here:
reads, stream polls, SQS receives and deletes (with receipt handles that no longer exist) are
replayed too, conditional writes and TTLs are judged against a new clock, every stream
record is produced again, and the log grows with every request, reads included. So the stack
takes a logical snapshot through the AWS API instead, the way one would back up the real
services (a table export, an object sync): every item of every table, every visible message
of every queue, every object of every bucket, written as JSON lines to a new directory that
then replaces the previous snapshot by rename (a crash mid-write leaves the previous one).

Restoring creates the resources, writes the items back into tables whose stream is switched on
only afterwards, so restored events are not counted a second time (their counts are restored
with the counts table), sends the messages again and puts the objects back.

What is saved when:
- on a clean stop (Ctrl-C, SIGTERM): after the API has stopped and the stream handler has
  caught up, and after the handlers have stopped: everything, queued messages included;
- every `interval` seconds while running: tables and buckets (queues cannot be read without
  taking their messages from the handlers).
A hard kill (SIGKILL, a crash, power loss) loses what changed since the last periodic
snapshot and every queued message; an event stored in that snapshot may not have been
counted yet (it stays uncounted) or may be counted but not yet stored in a report.
"""

from __future__ import annotations

import base64
import json
import shutil
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from tools.resources import STREAM_VIEW, Resources, ensure

FORMAT = 1


def _encode(value: Any) -> Any:
    """DynamoDB JSON with binary values (B, BS) as base64 text."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "B":
                out[k] = base64.b64encode(v).decode("ascii")
            elif k == "BS":
                out[k] = [base64.b64encode(b).decode("ascii") for b in v]
            else:
                out[k] = _encode(v)
        return out
    if isinstance(value, list):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "B" and isinstance(v, str):
                out[k] = base64.b64decode(v)
            elif k == "BS" and isinstance(v, list):
                out[k] = [base64.b64decode(b) for b in v]
            else:
                out[k] = _decode(v)
        return out
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def _write_lines(path: Path, rows: Iterator[dict[str, Any]]) -> int:
    count = 0
    with path.open("w") as out:
        for row in rows:
            out.write(json.dumps(row, separators=(",", ":")) + "\n")
            count += 1
    return count


def _read_lines(path: Path) -> Iterator[dict[str, Any]]:
    if not path.exists():
        return
    with path.open() as source:
        for line in source:
            if line.strip():
                yield json.loads(line)


class Snapshots:
    """Save and restore one stack's resources under `directory` (`data/` inside it)."""

    def __init__(self, directory: Path, dynamodb: Any, sqs: Any, s3: Any, resources: Resources) -> None:
        self.directory = directory
        self.dynamodb, self.sqs, self.s3 = dynamodb, sqs, s3
        self.resources = resources
        self.lock = threading.Lock()

    @property
    def current(self) -> Path:
        return self.directory / "data"

    def exists(self) -> bool:
        self._recover()
        return (self.current / "snapshot.json").exists()

    def discard(self) -> None:
        for name in ("data", "data.new", "data.old"):
            shutil.rmtree(self.directory / name, ignore_errors=True)

    def _recover(self) -> None:
        """A crash between the two renames leaves data.old: it is the last complete snapshot."""
        old = self.directory / "data.old"
        if old.exists() and not self.current.exists():
            old.rename(self.current)

    # -- saving ---------------------------------------------------------------------------

    def save(self, include_queues: bool) -> dict[str, int]:
        with self.lock:
            new = self.directory / "data.new"
            shutil.rmtree(new, ignore_errors=True)
            for part in ("tables", "queues", "buckets"):
                (new / part).mkdir(parents=True)
            counts: dict[str, int] = {}
            for table in self.resources.tables:
                counts[table.name] = _write_lines(new / "tables" / f"{table.name}.jsonl", self._items(table.name))
            if include_queues:
                for queue in self.resources.queues:
                    for name in (queue.name, queue.dead_letter_queue):
                        counts[name] = _write_lines(new / "queues" / f"{name}.jsonl", self._drain(name))
            elif self.current.exists():  # keep what the last full snapshot had
                shutil.rmtree(new / "queues")
                if (self.current / "queues").exists():
                    shutil.copytree(self.current / "queues", new / "queues")
                else:
                    (new / "queues").mkdir()
            for bucket in self.resources.buckets:
                counts[bucket] = _write_lines(new / "buckets" / f"{bucket}.jsonl", self._objects(bucket))
            (new / "snapshot.json").write_text(json.dumps({"format": FORMAT, "counts": counts}, indent=1))
            old = self.directory / "data.old"
            shutil.rmtree(old, ignore_errors=True)
            if self.current.exists():
                self.current.rename(old)
            new.rename(self.current)
            shutil.rmtree(old, ignore_errors=True)
            return counts

    def _items(self, table: str) -> Iterator[dict[str, Any]]:
        for page in self.dynamodb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
            for item in page.get("Items", []):
                yield _encode(item)

    def _drain(self, queue: str) -> Iterator[dict[str, Any]]:
        """Every visible message (taken from the queue: only done once the handlers stopped)."""
        url = self.sqs.get_queue_url(QueueName=queue)["QueueUrl"]
        while True:
            messages = self.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0, MessageAttributeNames=["All"]
            ).get("Messages", [])
            if not messages:
                return
            for message in messages:
                yield {"body": message["Body"], "attributes": message.get("MessageAttributes", {})}

    def _objects(self, bucket: str) -> Iterator[dict[str, Any]]:
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for entry in page.get("Contents", []):
                obj = self.s3.get_object(Bucket=bucket, Key=entry["Key"])
                yield {
                    "key": entry["Key"],
                    "content_type": obj.get("ContentType", "binary/octet-stream"),
                    "body": base64.b64encode(obj["Body"].read()).decode("ascii"),
                }

    # -- restoring ------------------------------------------------------------------------

    def restore(self, region: str) -> dict[str, int]:
        """Create the resources and load the snapshot into them; returns what was loaded.

        Tables with a stream are created without it, loaded, and only then given their stream
        (moto cannot switch a stream off), so restored events do not reach the stream handler.
        """
        meta = json.loads((self.current / "snapshot.json").read_text())
        if meta.get("format") != FORMAT:
            raise SystemExit(f"{self.current} has snapshot format {meta.get('format')}, expected {FORMAT}")
        streamless = replace(self.resources, tables=tuple(replace(t, stream=False) for t in self.resources.tables))
        ensure(self.dynamodb, self.sqs, self.s3, streamless, region)
        counts: dict[str, int] = {}
        for table in self.resources.tables:
            rows = _read_lines(self.current / "tables" / f"{table.name}.jsonl")
            counts[table.name] = self._put_items(table.name, (_decode(row) for row in rows))
            if table.stream:
                self.dynamodb.update_table(
                    TableName=table.name, StreamSpecification={"StreamEnabled": True, "StreamViewType": STREAM_VIEW}
                )
        for queue in self.resources.queues:
            for name in (queue.name, queue.dead_letter_queue):
                url = self.sqs.get_queue_url(QueueName=name)["QueueUrl"]
                counts[name] = 0
                for row in _read_lines(self.current / "queues" / f"{name}.jsonl"):
                    extra = {"MessageAttributes": row["attributes"]} if row.get("attributes") else {}
                    self.sqs.send_message(QueueUrl=url, MessageBody=row["body"], **extra)
                    counts[name] += 1
        for bucket in self.resources.buckets:
            counts[bucket] = 0
            for row in _read_lines(self.current / "buckets" / f"{bucket}.jsonl"):
                self.s3.put_object(
                    Bucket=bucket, Key=row["key"], Body=base64.b64decode(row["body"]), ContentType=row["content_type"]
                )
                counts[bucket] += 1
        return counts

    def _put_items(self, table: str, items: Iterator[dict[str, Any]]) -> int:
        count = 0
        batch: list[dict[str, Any]] = []
        for item in items:
            batch.append({"PutRequest": {"Item": item}})
            count += 1
            if len(batch) == 25:
                self._write_batch(table, batch)
                batch = []
        if batch:
            self._write_batch(table, batch)
        return count

    def _write_batch(self, table: str, batch: list[dict[str, Any]]) -> None:
        request = {table: batch}
        while request:
            request = self.dynamodb.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
