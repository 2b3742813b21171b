"""The counts-table items of windowed counters: their keys and attribute names. Pure. The
table of keys and what each attribute proves: docs/counting.md ("The proof", "Inline
minutes", "Packs", "Dimensions, values, filters and breakdowns", "Item sizes")."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import reduce
from typing import Any

from chalicelib.core import attributes, decimals, keyspace, timebuckets
from chalicelib.core.timebuckets import Bucket
from chalicelib.events import dimensions as event_dimensions

PREFIX = {"quarter": "q", "hour": "h", "day": "d"}  # of sort keys (quarter hours: summaries only)
MAX_PARTITION_KEY_BYTES = 2048  # DynamoDB's limit
# DynamoDB stream sequence numbers are decimal strings of 21 to 40 digits (StreamRecord API).
_SEQUENCE = re.compile(r"[0-9]{1,40}")


def bucket_sort_key(resolution: str, index: int) -> str:
    return keyspace.index_sort_key(PREFIX[resolution], index)


def minute_attribute(minute_of_hour: int) -> str:
    return f"m{minute_of_hour:02d}"


def counter_pk(counter: str) -> str:
    return f"{keyspace.COUNTER}{counter}"


def bucket_key(counter: str, bucket: Bucket) -> dict[str, Any]:
    return bucket_item_key(counter_pk(counter), bucket)


def bucket_item_key(pk: str, bucket: Bucket) -> dict[str, Any]:
    """The bucket of a counter's or a filter's pk."""
    return item_key(pk, bucket_sort_key(bucket.resolution, bucket.index))


def marker_key(counter: str, event_id: str) -> dict[str, Any]:
    return item_key(f"{keyspace.EVENT_MARKER}{counter}#{event_id}", "#")


# -- stream positions (docs/counting.md, "The proof" and "Packs") -----------------------------

SHARD_ATTRIBUTE_PREFIX = "s:"


def shard_attribute(shard_id: str) -> str:
    """The attribute holding one stream shard's position on an item."""
    return SHARD_ATTRIBUTE_PREFIX + hashlib.sha256(shard_id.encode("utf-8")).hexdigest()[:8]


def is_shard_attribute(name: str) -> bool:
    return name.startswith(SHARD_ATTRIBUTE_PREFIX)


def sequence_position(sequence_number: str) -> str | None:
    """A stream sequence number as a string that sorts like the number; None if it is not one."""
    if not _SEQUENCE.fullmatch(sequence_number) or (sequence_number.startswith("0") and sequence_number != "0"):
        return None
    return f"{len(sequence_number):02d}{sequence_number}"


PACK_INDEX_DIGITS = 3  # a pack holds at most 25 events (events/packs.py)


def event_position(sequence_number: str, pack_index: int | None) -> str | None:
    """The position of one event of a stream record (docs/counting.md, "Packs")."""
    position = sequence_position(sequence_number)
    if position is None or pack_index is None:
        return position
    if not 0 <= pack_index < 10**PACK_INDEX_DIGITS:
        return None
    return f"{position}{pack_index:0{PACK_INDEX_DIGITS}d}"


def stamped_position(position: str, created_s: int, first: str = "", before: str = "") -> str:
    """What an item stores for a shard: the position, its record's creation time, the update's range."""
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


# -- inline minutes of a day item (docs/counting.md, "Inline minutes") ------------------------

INLINE_MAX = 8
INLINE_COUNT = "ic"
SPILL_PREFIX = "x:"
NOT_SPILLED = "~"  # sorts after every position (digits)
FROM_START = "!"  # sorts before every position


def inline_attribute(minute_of_day: int) -> str:
    return f"i{minute_of_day:04d}"


def inline_minutes(item: Mapping[str, Any] | None) -> dict[int, int]:
    """A day item's inline minutes: minute of day -> count."""
    return {
        int(k[1:]): int(v["N"])
        for k, v in (item or {}).items()
        if len(k) == 5 and k[0] == "i" and k[1:].isdigit() and isinstance(v, dict) and "N" in v
    }


def hour_inline(day: Mapping[str, Any] | None, hour: Bucket) -> dict[int, int]:
    """What a day item holds inline of one of its hours, by minute of the hour."""
    start = hour.first_minute % timebuckets.DAY_MINUTES
    return {m - start: k for m, k in inline_minutes(day).items() if start <= m < start + 60}


def spill_attribute(shard_attribute: str) -> str:
    """The day item's attribute saying where the events of one shard (`s:<hash>`) went."""
    return SPILL_PREFIX + shard_attribute[len(SHARD_ATTRIBUTE_PREFIX) :]


def held_inline(spill: str | None, position: str) -> bool:
    """Whether an event a day item holds is held inline, given its shard's `x:` (None: absent)."""
    return spill is not None and position < spill


def held_id(key: dict[str, Any]) -> str:
    """The id by which a set-aside record names an item that took it (stream_records.HELD_FIELD)."""
    pk, sk = attributes.key_of(key)
    return hashlib.sha256(pk.encode("utf-8")).hexdigest()[:16] + "|" + sk


# -- sums in slots (docs/counting.md, "Item sizes": value names) ------------------------------

MAX_SUM_NAMES = event_dimensions.MAX_VALUES
NOT_SUMMED = "vx"


def slot_name_attribute(slot: int) -> str:
    return f"w{slot}"


def slot_total_attribute(slot: int) -> str:
    return f"t{slot}"


def slot_minute_attribute(minute_of_hour: int, slot: int) -> str:
    return f"v{minute_of_hour:02d}{slot}"


def slots_of(item: Mapping[str, Any]) -> dict[int, str]:
    """The value names a stored bucket item sums, by slot."""
    return {
        int(k[1]): str(v["S"])
        for k, v in item.items()
        if len(k) == 2 and k[0] == "w" and k[1].isdigit() and isinstance(v, dict) and "S" in v
    }


def not_summed(item: Mapping[str, Any] | None) -> int:
    """How many values of the events an item counts it did not sum (no slot for their name)."""
    return attributes.integer(dict(item or {}), NOT_SUMMED, 0)


def sums_of(item: Mapping[str, Any], minutes: tuple[int, int] | None, resolution: str) -> dict[str, Decimal]:
    """The sums of a stored bucket item: the whole bucket (minutes None), or minutes first..last."""
    sums: dict[str, Decimal] = {}
    first, last = minutes if minutes is not None else (0, 59)
    for slot, name in slots_of(item).items():
        if resolution == "day":
            held = [slot_total_attribute(slot)]
        else:
            held = [slot_minute_attribute(m, slot) for m in range(first, last + 1)]
        found = [attributes.decimal(item, a) for a in held if a in item]
        if found:
            sums[name] = reduce(decimals.EXACT.add, found, Decimal(0))
    return sums


# -- breakdown summaries (docs/counting.md, "Breakdowns") -------------------------------------

SUMMARY_PARTS = 8  # parts of a split hour or day summary, by value hash
QUARTER_MINUTES = 15
PARTS = {"quarter": 1, "hour": SUMMARY_PARTS, "day": SUMMARY_PARTS}
LAYOUT = "layout"  # on part 0: SINGLE (one item holds the bucket's summary) or "parts"
SINGLE = "single"


def part_of(value: str, resolution: str) -> int:
    return int(hashlib.sha256(value.encode("utf-8")).hexdigest()[:8], 16) % PARTS[resolution]


def hour_entry(minute: int, value: str, span: int = 60) -> str:
    """A value's entry in one minute of an hour's summary (span QUARTER_MINUTES: of a quarter
    hour's): the minute within it (2 digits), then the value."""
    return f"{minute % span:02d}{value}"


def split_entry(entry: str) -> tuple[int, str]:
    """A minute entry (hour_entry) as its minute and its value."""
    return int(entry[:2]), entry[2:]


def summary_key(counter: str, dimension: str, resolution: str, index: int, part: int) -> dict[str, Any]:
    return item_key(f"{keyspace.SUMMARY}{counter}#{dimension}", f"{bucket_sort_key(resolution, index)}#{part}")


def summary_parts(counter: str, dimension: str, resolution: str, index: int) -> list[dict[str, Any]]:
    """The keys of every part of one bucket's (or quarter hour's) summary of a dimension."""
    return [summary_key(counter, dimension, resolution, index, p) for p in range(PARTS[resolution])]


def item_key(pk: str, sk: str) -> dict[str, Any]:
    """A key DynamoDB will take: valid text within the size limit, else ValueError."""
    size = len(pk.encode("utf-8"))  # raises UnicodeEncodeError (a ValueError) on a lone surrogate
    if size > MAX_PARTITION_KEY_BYTES:
        raise ValueError(f"key of {size} bytes is over DynamoDB's {MAX_PARTITION_KEY_BYTES}")
    return {"pk": {"S": pk}, "sk": {"S": sk}}
