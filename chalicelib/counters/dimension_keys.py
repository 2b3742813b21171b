"""Key layout and attribute names for dimensions, values and filters. Pure.

An event of counter C with dimensions D (at most 4) and values V (at most 8) is counted in:

- C's own buckets (`CTR#<C>`), which also hold the sums of V;
- one FILTER counter per dimension of D and per pair of them (at most 4 + 6 = 10; every subset
  would be 15): `FLT#<C>#<32 hex of sha256 of S>` with exactly the bucket layout of a counter
  (hour items with their minutes, day items, sums, shard positions). A filter `where` of one
  or two clauses is answered from the one filter counter of its clauses, exactly, at the
  bounded cost of a count; three or four clauses have no counter and are refused (a 400): an
  answer made from the pairs would not be exact, and counting every subset costs half as much
  again per event as singles and pairs (docs/counting.md, "Filters");
- one breakdown summary per dimension d in D: `TOP#<C>#<d>`, per hour and per day. While it is
  small (summaries.SINGLE_BYTES) a bucket's summary is one item, part 0 (`layout` "single"),
  whose hour entries are (minute of the hour, value); once it outgrows that, it is split, in
  one transaction, into SUMMARY_PARTS parts by a hash of the value and, for hours, quarter-hour
  items (one part) whose entries are (minute of the quarter, value), for the partial hours of a
  window (counters/topk.py, counters/summaries.py).

Sums live beside counts in at most MAX_SUM_NAMES slots per bucket item (`<s>`, one digit): `w<s>`
= the value name, `t<s>` = its sum over the bucket (day items), `v<mm><s>` = its sum in minute mm
(hour items). A name takes the next free slot of the item, on condition that the slot is free
(and a name already in a slot, that it is still there), so no item sums more than MAX_SUM_NAMES
names whatever the number of value names a counter's events carry: a value whose name finds no
slot is not summed there, and `vx` counts such values (docs/counting.md, "Item sizes").
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from itertools import combinations
from typing import Any

from chalicelib.core import attributes, decimals, keyspace
from chalicelib.core.errors import ValidationError
from chalicelib.core.timebuckets import Bucket
from chalicelib.counters import keys as counter_keys
from chalicelib.events import dimensions as event_dimensions

FILTER = keyspace.FILTER
SUMMARY = keyspace.SUMMARY
# Parts of an hour or day summary (by value hash): each item holds what fits in SUMMARY_ITEM_BYTES.
SUMMARY_PARTS = 8
QUARTER_SUMMARY_PARTS = 1
QUARTER_MINUTES = 15
PARTS = {"quarter": QUARTER_SUMMARY_PARTS, "hour": SUMMARY_PARTS, "day": SUMMARY_PARTS}
SUMMARY_PREFIX = {"quarter": "q", "hour": "h", "day": "d"}
# Filter counters are kept for single dimensions and pairs: a `where` holds at most this many clauses.
MAX_WHERE = 2


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def subset_id(subset: Mapping[str, str]) -> str:
    """A subset of dimensions as 32 hex characters: the same for the same pairs in any order."""
    return _digest(json.dumps(sorted(subset.items()), ensure_ascii=False, separators=(",", ":")))[:32]


def filter_pk(counter: str, subset: Mapping[str, str]) -> str:
    return f"{FILTER}{counter}#{subset_id(subset)}"


def counter_pk(counter: str) -> str:
    return f"{keyspace.COUNTER}{counter}"


EVERY_PAIR = ("*",)


def pair_counted(names: Iterable[str], pairs: tuple[str, ...]) -> bool:
    """Whether two dimension names have a filter counter under the FILTER_PAIRS setting."""
    if pairs == EVERY_PAIR:
        return True
    a, b = sorted(names)
    return f"{a}+{b}" in pairs or f"{b}+{a}" in pairs


def subsets(dimensions: Mapping[str, str], pairs: tuple[str, ...] = EVERY_PAIR) -> Iterator[dict[str, str]]:
    """The subsets of an event's dimensions that have a filter counter: each dimension alone and
    each pair the FILTER_PAIRS setting counts (every pair: k + k(k-1)/2 of them, at most 10)."""
    chosen = sorted(dimensions.items())
    for one in chosen:
        yield dict([one])
    for two in combinations(chosen, 2):
        if pair_counted((two[0][0], two[1][0]), pairs):
            yield dict(two)


def count_pks(counter: str, dimensions: Mapping[str, str], pairs: tuple[str, ...] = EVERY_PAIR) -> list[str]:
    """The partition keys of every counter an event is counted in: its own, then its filters."""
    return [counter_pk(counter)] + [filter_pk(counter, s) for s in subsets(dimensions, pairs)]


def check_filter(names: Iterable[str], pairs: tuple[str, ...]) -> None:
    """ValidationError unless the dimensions named have a filter counter (none, one, or a pair counted)."""
    names = sorted(set(names))
    if len(names) > MAX_WHERE:
        raise ValidationError(
            f"at most {MAX_WHERE} dimensions can be filtered on together: filters are counted for single "
            "dimensions and pairs"
        )
    if len(names) == 2 and not pair_counted(names, pairs):
        raise ValidationError(
            f"{names[0]} and {names[1]} together have no filter counter: the FILTER_PAIRS setting "
            "names the pairs counted"
        )


def read_pk(counter: str, where: Mapping[str, str]) -> str:
    """The counter a (possibly filtered) count is read from."""
    return filter_pk(counter, where) if where else counter_pk(counter)


def bucket_item_key(pk: str, bucket: Bucket) -> dict[str, Any]:
    return counter_keys.item_key(pk, counter_keys.bucket_sort_key(bucket.resolution, bucket.index))


# -- sums ----------------------------------------------------------------------------------


# A bucket item sums at most this many value names: an event's limit, so an event alone is
# always summed whole.
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
    """The sums a stored bucket item holds: the whole bucket (minutes None), or minutes
    first..last of an hour item."""
    sums: dict[str, Decimal] = {}
    for slot, name in slots_of(item).items():
        if resolution == "day":
            if slot_total_attribute(slot) in item:
                sums[name] = attributes.decimal(item, slot_total_attribute(slot))
            continue
        first, last = minutes if minutes is not None else (0, 59)
        held = [slot_minute_attribute(m, slot) for m in range(first, last + 1)]
        found = [attributes.decimal(item, a) for a in held if a in item]
        if found:
            total = Decimal(0)
            for amount in found:
                total = decimals.EXACT.add(total, amount)
            sums[name] = total
    return sums


# -- breakdown summaries ---------------------------------------------------------------------


def part_of(value: str, resolution: str) -> int:
    return int(_digest(value)[:8], 16) % PARTS[resolution]


def quarter_entry(minute: int, value: str) -> str:
    """The entry of a value in one minute of a quarter-hour summary: the minute of the quarter
    (2 digits), then the value."""
    return f"{minute % QUARTER_MINUTES:02d}{value}"


def hour_entry(minute: int, value: str) -> str:
    """The entry of a value in one minute of an hour summary kept whole (one item, summaries.py):
    the minute of the hour (2 digits), then the value."""
    return f"{minute % 60:02d}{value}"


def split_quarter_entry(entry: str) -> tuple[int, str]:
    """A minute entry (quarter_entry, hour_entry) as its minute and its value."""
    return int(entry[:2]), entry[2:]


def summary_pk(counter: str, dimension: str) -> str:
    return f"{SUMMARY}{counter}#{dimension}"


def summary_sk(resolution: str, index: int, part: int) -> str:
    return f"{keyspace.index_sort_key(SUMMARY_PREFIX[resolution], index)}#{part}"


def summary_key(counter: str, dimension: str, resolution: str, index: int, part: int) -> dict[str, Any]:
    return counter_keys.item_key(summary_pk(counter, dimension), summary_sk(resolution, index, part))


# -- filters ---------------------------------------------------------------------------------


def parse_where(raw: list[str] | None) -> dict[str, str]:
    """`where=name:value` clauses (the value may hold colons) as {name: value}; all must hold."""
    if len(raw or []) > MAX_WHERE:
        raise ValidationError(
            f"where holds at most {MAX_WHERE} clauses: filters are counted for single dimensions and pairs"
        )
    where: dict[str, str] = {}
    for clause in raw or []:
        name, colon, value = clause.partition(":")
        if not colon:
            raise ValidationError(f"where must be name:value, got {clause[:80]!r}")
        event_dimensions.dimensions({name: value}, "where")
        if name in where and where[name] != value:
            raise ValidationError(f"where names {name} twice with different values: no event can match")
        where[name] = value
    return where
