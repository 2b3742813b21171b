"""Counts-table key layout for windowed counters. Pure.

    CTR#<counter> / m#<minute> | h#<hour> | d#<day>   a bucket (index since the epoch)
    EVT#<counter>#<id> / #                            marker of an event with a client id
    LED#<events pk>#<ingest second> / #               ledger of stored events counted
    QUARANTINE#events-stream / <stream event id>      a record that could not be counted
"""

from __future__ import annotations

import re
from typing import Any

from chalicelib.timebuckets import Bucket

PREFIX = {"minute": "m", "hour": "h", "day": "d"}
QUARANTINE_PK = "QUARANTINE#events-stream"
# Events-table sort keys: ISO ingest time to the second, then ".mmmZ#<random>".
_EVENT_SORT_KEY = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d{3}Z#[A-Za-z0-9_-]{1,64})")


def bucket_sort_key(resolution: str, index: int) -> str:
    return f"{PREFIX[resolution]}#{index:010d}"


def bucket_key(counter: str, bucket: Bucket) -> dict[str, Any]:
    return {"pk": {"S": f"CTR#{counter}"}, "sk": {"S": bucket_sort_key(bucket.resolution, bucket.index)}}


def marker_key(counter: str, event_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"EVT#{counter}#{event_id}"}, "sk": {"S": "#"}}


def ledger_key_and_entry(events_pk: str, events_sk: str) -> tuple[dict[str, Any], str] | None:
    """Ledger item key and the entry that stands for one stored event, or None if the key is foreign."""
    match = _EVENT_SORT_KEY.fullmatch(events_sk)
    if not match:
        return None
    return {"pk": {"S": f"LED#{events_pk}#{match.group(1)}"}, "sk": {"S": "#"}}, match.group(2)
