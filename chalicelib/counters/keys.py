"""Counts-table key layout for windowed counters. Pure.

CTR#<counter> / h#<hour> | d#<day>                a bucket (index since the epoch); an hour
                                                  item also holds m00..m59, its minutes' counts
EVT#<counter>#<id> / #                            marker of an event with a client id
LED#<events pk>#<ingest time slice> / #           ledger of stored events counted
QUARANTINE#events-stream / <stream event id>      a record that could not be counted
"""

from __future__ import annotations

import re
from typing import Any

from chalicelib.core import keyspace
from chalicelib.core.timebuckets import Bucket

PREFIX = {"hour": "h", "day": "d"}
# Events-table sort keys: ISO ingest minute, then "SS.mmmZ#<random>".
_EVENT_SORT_KEY = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:)((\d\d)\.\d{3}Z#[A-Za-z0-9_-]{1,64})")
LEDGER_SLICES = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60)  # seconds that divide a minute


def bucket_sort_key(resolution: str, index: int) -> str:
    return f"{PREFIX[resolution]}#{index:010d}"


def minute_attribute(minute_of_hour: int) -> str:
    return f"m{minute_of_hour:02d}"


def bucket_key(counter: str, bucket: Bucket) -> dict[str, Any]:
    return {"pk": {"S": f"{keyspace.COUNTER}{counter}"}, "sk": {"S": bucket_sort_key(bucket.resolution, bucket.index)}}


def marker_key(counter: str, event_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"{keyspace.EVENT_MARKER}{counter}#{event_id}"}, "sk": {"S": "#"}}


def ledger_key_and_entry(events_pk: str, events_sk: str, slice_seconds: int) -> tuple[dict[str, Any], str] | None:
    """Ledger item key and the entry that stands for one stored event, or None if the key is foreign.

    One ledger holds the events of one events partition ingested in one slice of a minute:
    longer slices mean fewer, larger ledger writes (see LEDGER_SECONDS in the README).
    """
    match = _EVENT_SORT_KEY.fullmatch(events_sk)
    if not match or slice_seconds not in LEDGER_SLICES:
        return None
    first_second = int(match.group(3)) // slice_seconds * slice_seconds
    return {
        "pk": {"S": f"{keyspace.LEDGER}{events_pk}#{match.group(1)}{first_second:02d}"},
        "sk": {"S": "#"},
    }, match.group(2)
