"""Counting the work a request does where it is done: time buckets built, JSON documents parsed,
event attributes converted, storage calls made and writes that succeeded. Never wall time."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from chalicelib.core import inputs, keyspace, timebuckets
from chalicelib.events import ingest

WRITES = frozenset(
    {
        "put_item",
        "update_item",
        "delete_item",
        "batch_write_item",
        "transact_write_items",
        "send_message",
        "send_message_batch",
        "delete_message",
        "delete_message_batch",
        "put_object",
        "delete_object",
    }
)


@dataclass
class Meter:
    buckets: int = 0
    parses: int = 0
    conversions: int = 0
    calls: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)

    def reset(self) -> None:
        self.buckets = self.parses = self.conversions = 0
        self.calls.clear()
        self.writes.clear()


class Recording:
    """A client whose calls are recorded (writes once they succeed), otherwise the real one."""

    def __init__(self, real: Any, meter: Meter) -> None:
        self.real = real
        self.meter = meter

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.real, name)
        if not callable(method) or name.startswith("_") or name in {"meta", "exceptions"}:
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            checking = is_key_lookup(name, kwargs) or is_rate_count(name, kwargs)
            if not checking:
                self.meter.calls.append(name)
            result = method(*args, **kwargs)
            if name in WRITES and not checking:
                self.meter.writes.append(name)
            return result

        return call


def is_key_lookup(name: str, kwargs: dict[str, Any]) -> bool:
    """The access check's one GetItem of the caller's key: bounded, and made for every request."""
    key = kwargs.get("Key") or {}
    return name == "get_item" and str(key.get("pk", {}).get("S", "")).startswith(keyspace.ACCESS_KEY)


def is_rate_count(name: str, kwargs: dict[str, Any]) -> bool:
    """The access check's one UpdateItem counting the caller's key against its rate (access/rates.py):
    at most one per request (none within the process's allowance), before the route;
    tests/functional/access/test_tracker_keys.py checks it."""
    key = kwargs.get("Key") or {}
    return name == "update_item" and str(key.get("pk", {}).get("S", "")).startswith(keyspace.KEY_RATE)


def install(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Meter:
    meter = Meter()
    real_init = timebuckets.Bucket.__init__
    real_convert = ingest._to_dynamodb_numbers

    def bucket_init(self: Any, *args: Any, **kwargs: Any) -> None:
        meter.buckets += 1
        real_init(self, *args, **kwargs)

    class CountingJson:
        @staticmethod
        def loads(*args: Any, **kwargs: Any) -> Any:
            meter.parses += 1
            return json.loads(*args, **kwargs)

    def convert(value: Any) -> Any:
        meter.conversions += 1
        return real_convert(value)

    monkeypatch.setattr(timebuckets.Bucket, "__init__", bucket_init)
    monkeypatch.setattr(inputs, "json", CountingJson)
    monkeypatch.setattr(ingest, "_to_dynamodb_numbers", convert)
    for name in ("dynamodb", "sqs", "s3"):
        monkeypatch.setattr(aws, name, Recording(getattr(aws, name), meter))
    return meter
