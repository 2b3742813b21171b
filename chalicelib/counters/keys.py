"""Counts-table key layout for windowed counters. Pure.

CTR#<counter> / h#<hour> | d#<day>                a bucket (index since the epoch); an hour
                                                  item also holds m00..m59, its minutes' counts
EVT#<counter>#<id> / #                            marker of an event with a client id
SEQ#<events pk> / #                               stream position counted up to, per events partition
QUARANTINE#events-stream / <stream event id>      a record that could not be counted
"""

from __future__ import annotations

import re
from typing import Any

from chalicelib.core import keyspace
from chalicelib.core.timebuckets import Bucket

PREFIX = {"hour": "h", "day": "d"}
MAX_PARTITION_KEY_BYTES = 2048  # DynamoDB's limit
# DynamoDB stream sequence numbers are decimal strings of 21 to 40 digits (StreamRecord API).
SEQUENCE_DIGITS = 40
_SEQUENCE = re.compile(r"[0-9]{1,40}")


def bucket_sort_key(resolution: str, index: int) -> str:
    return keyspace.index_sort_key(PREFIX[resolution], index)


def minute_attribute(minute_of_hour: int) -> str:
    return f"m{minute_of_hour:02d}"


def bucket_key(counter: str, bucket: Bucket) -> dict[str, Any]:
    return _key(f"{keyspace.COUNTER}{counter}", bucket_sort_key(bucket.resolution, bucket.index))


def marker_key(counter: str, event_id: str) -> dict[str, Any]:
    return _key(f"{keyspace.EVENT_MARKER}{counter}#{event_id}", "#")


def position_key(events_pk: str) -> dict[str, Any]:
    """The item holding how far the stream of one events partition has been counted."""
    return _key(f"{keyspace.STREAM_POSITION}{events_pk}", "#")


def sequence_position(sequence_number: str) -> str | None:
    """A stream sequence number as a string that sorts like the number (DynamoDB compares
    strings byte by byte), or None if it is not one."""
    if not _SEQUENCE.fullmatch(sequence_number):
        return None
    return sequence_number.rjust(SEQUENCE_DIGITS, "0")


def _key(pk: str, sk: str) -> dict[str, Any]:
    """A key DynamoDB will take: valid text within the size limit, else ValueError."""
    size = len(pk.encode("utf-8"))  # raises UnicodeEncodeError (a ValueError) on a lone surrogate
    if size > MAX_PARTITION_KEY_BYTES:
        raise ValueError(f"key of {size} bytes is over DynamoDB's {MAX_PARTITION_KEY_BYTES}")
    return {"pk": {"S": pk}, "sk": {"S": sk}}
