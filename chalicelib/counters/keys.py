"""Counts-table key layout for windowed counters. Pure.

CTR#<counter> / h#<hour> | d#<day>                a bucket (index since the epoch); an hour
                                                  item also holds m00..m59, its minutes' counts, and
                                                  every bucket `s:<shard hash>`: how far each stream
                                                  shard that wrote to it has been applied, and the
                                                  sums of event values (counters/dimension_keys.py)
FLT#<counter>#<subset hash> / h#.. | d#..         the same buckets for the events with some dimension
                                                  values (a filter; counters/dimension_keys.py)
TOP#<counter>#<dimension> / q#|h#|d#<n>#<part>    a breakdown summary (counters/topk.py)
EVT#<counter>#<id> / #                            marker of an event with a client id; `c` names the
                                                  stream record that claimed it (shard hash, position)
AUQ#<quarter hour> / s:<shard hash> | #repaired  audit counters of a quarter hour's events partitions,
                                                  one item per stream shard (counters/audit_keys.py)
QUARANTINE#events-stream / <stream event id>      a record that could not be counted
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from chalicelib.core import attributes, keyspace
from chalicelib.core.timebuckets import Bucket

PREFIX = {"hour": "h", "day": "d"}
MAX_PARTITION_KEY_BYTES = 2048  # DynamoDB's limit
# DynamoDB stream sequence numbers are decimal strings of 21 to 40 digits (StreamRecord API).
_SEQUENCE = re.compile(r"[0-9]{1,40}")


def bucket_sort_key(resolution: str, index: int) -> str:
    return keyspace.index_sort_key(PREFIX[resolution], index)


def minute_attribute(minute_of_hour: int) -> str:
    return f"m{minute_of_hour:02d}"


def bucket_key(counter: str, bucket: Bucket) -> dict[str, Any]:
    return _key(f"{keyspace.COUNTER}{counter}", bucket_sort_key(bucket.resolution, bucket.index))


def marker_key(counter: str, event_id: str) -> dict[str, Any]:
    return _key(f"{keyspace.EVENT_MARKER}{counter}#{event_id}", "#")


def audit_group_key(group: str, sort_key: str) -> dict[str, Any]:
    """An audit item of a group of events partitions (their quarter hour: counters/audit_keys.py)."""
    return _key(f"{keyspace.AUDIT_GROUP}{group}", sort_key)


SHARD_ATTRIBUTE_PREFIX = "s:"


def shard_attribute(shard_id: str) -> str:
    """The attribute holding one stream shard's position on an item: a short hash of the shard
    id (32 bits: a collision between two of the few shards that write one item is negligible,
    and would only make one shard's records look applied to the other: never an overcount)."""
    return SHARD_ATTRIBUTE_PREFIX + hashlib.sha256(shard_id.encode("utf-8")).hexdigest()[:8]


def is_shard_attribute(name: str) -> bool:
    return name.startswith(SHARD_ATTRIBUTE_PREFIX)


def sequence_position(sequence_number: str) -> str | None:
    """A stream sequence number as a string that sorts like the number (DynamoDB compares
    strings byte by byte): its digit count (2 digits) then the digits, or None if it is not
    one. Shorter than padding to 40 digits, and as exact: a number with fewer digits is smaller."""
    if not _SEQUENCE.fullmatch(sequence_number) or (sequence_number.startswith("0") and sequence_number != "0"):
        return None
    return f"{len(sequence_number):02d}{sequence_number}"


PACK_INDEX_DIGITS = 3  # a pack holds at most 25 events (events/packs.py)


def event_position(sequence_number: str, pack_index: int | None) -> str | None:
    """The position of one event of a stream record: the record's own position for an item of
    one event (so positions stored before packs existed still mean what they meant), and for
    the event at `pack_index` of a pack the record's position followed by the index in fixed
    width. Every position of a record sorts after every position of an earlier record and
    before every position of a later one (the same length prefix, then the record's digits
    decide), and a pack's events in pack order: a redelivered pack finds each event applied or
    not, and a pack cut by a failure resumes at the first event not applied."""
    position = sequence_position(sequence_number)
    if position is None or pack_index is None:
        return position
    if not 0 <= pack_index < 10**PACK_INDEX_DIGITS:
        return None
    return f"{position}{pack_index:0{PACK_INDEX_DIGITS}d}"


def stamped_position(position: str, created_s: int, first: str = "", before: str = "") -> str:
    """What an item stores for a shard: the position applied up to, when its record was written
    to the stream (so a position no delivery can come back below can be pruned), and the range
    of the update that set it: its first record and the position stored before it. A record
    found between those two was never applied by it: a skip, not a redelivery. The value sorts
    against a bare position exactly like the position alone (a bare position equal to it is its
    prefix; positions of different lengths differ in their 2-digit length prefix)."""
    return f"{position}@{created_s}@{first}@{before}"


@dataclass(frozen=True)
class Stamp:
    position: str = ""
    created_s: int | None = None
    first: str = ""
    before: str = ""


def split_stamped(value: str) -> Stamp:
    parts = (value.split("@") + ["", "", ""])[:4]
    return Stamp(parts[0], int(parts[1]) if parts[1].isdigit() else None, parts[2], parts[3])


# A counter quiet in a day keeps the minutes of its first events in its day item (`i<minute of
# day, 4 digits>`, at most INLINE_MAX events, `ic` of them), so a lone event costs one write;
# past that they spill to the hour items. `x:<shard hash>` on a day item says, per shard, where
# that shard's events went (stream_apply): NOT_SPILLED, every event of the shard at or below its
# position is inline; a position, the events before it are inline and those from it on are in
# hour items; FROM_START, every one is in hour items. A read adds a day's inline minutes to its hours (reads.py).
INLINE_MAX = 8
INLINE_COUNT = "ic"
SPILL_PREFIX = "x:"
NOT_SPILLED = "~"  # sorts after every position (digits)
FROM_START = "!"  # sorts before every position


def inline_attribute(minute_of_day: int) -> str:
    return f"i{minute_of_day:04d}"


def inline_minutes(item: dict[str, Any] | None) -> dict[int, int]:
    """A day item's inline minutes: minute of day -> count."""
    return {
        int(k[1:]): int(v["N"])
        for k, v in (item or {}).items()
        if len(k) == 5 and k[0] == "i" and k[1:].isdigit() and isinstance(v, dict) and "N" in v
    }


def spill_attribute(shard_attribute: str) -> str:
    """The day item's attribute saying where the events of one shard (`s:<hash>`) went."""
    return SPILL_PREFIX + shard_attribute[len(SHARD_ATTRIBUTE_PREFIX) :]


def held_inline(spill: str | None, position: str) -> bool:
    """Whether an event a day item holds (at or below its shard's position) is held inline,
    given that shard's `x:` value (None: absent)."""
    return spill is not None and position < spill


def held_id(key: dict[str, Any]) -> str:
    """A short id of a counts-table item that took a record before the record was set aside
    (the set-aside copy lists them, stream_records.HELD_FIELD): 16 hex of sha256 of its pk, then
    its sk. A collision among the few items one record touches is negligible."""
    pk, sk = attributes.key_of(key)
    return hashlib.sha256(pk.encode("utf-8")).hexdigest()[:16] + "|" + sk


def item_key(pk: str, sk: str) -> dict[str, Any]:
    """A key DynamoDB will take (see _key): for the modules that build other counters' keys."""
    return _key(pk, sk)


def _key(pk: str, sk: str) -> dict[str, Any]:
    """A key DynamoDB will take: valid text within the size limit, else ValueError."""
    size = len(pk.encode("utf-8"))  # raises UnicodeEncodeError (a ValueError) on a lone surrogate
    if size > MAX_PARTITION_KEY_BYTES:
        raise ValueError(f"key of {size} bytes is over DynamoDB's {MAX_PARTITION_KEY_BYTES}")
    return {"pk": {"S": pk}, "sk": {"S": sk}}
