"""What a recounted bucket item's sums must be, and what to change on the stored item to make
them so (the repair, counters/repair.py). Pure.

The sums of an item are its value names, in one-digit slots (dimension_keys), their sums (`v<mm><s>` per minute on hour items, `t<s>` on day items), and
`vx`, the values not summed for want of a slot. From the events the bucket counts, in the
order they were read:

- a value whose name holds a slot on the item, or takes a free one, is summed there, and one
  whose name finds none is counted in `vx`: stream_apply.BucketUpdate decides both, exactly as
  it does for the stream handler (the names the item holds keep their slots, a new name takes
  the lowest free slot in the order of the events);
- a name no event of the bucket carries any more leaves the item.

So an item's sums are a function of its events and of the names it held: a repair run twice
changes nothing the second time, and an item the stream counted whole is left as it is. The
item takes no attribute the stream handler could not give it (slots, minutes, `vx`), so the
16 KB bound of docs/counting.md ("Item sizes") holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from chalicelib.core.timebuckets import Bucket
from chalicelib.counters import dimension_keys
from chalicelib.counters.stream_apply import BucketUpdate
from chalicelib.events.ingest import Event

# The attributes holding sums: slots (`w3`, `t3`, `v053`) and `vx`.
_SUM_ATTRIBUTE = re.compile(r"[wt][0-9]|v[0-9]{3}|vx")


@dataclass(frozen=True)
class SumsChange:
    """The attributes to SET (with their values) and to REMOVE on a bucket item for its sums to
    be the recount's; both empty when they are already."""

    sets: dict[str, dict[str, Any]] = field(default_factory=dict)
    removes: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.sets or self.removes)


def stored_sums(item: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The attributes of a stored bucket item that hold its sums (names, sums and `vx`)."""
    return {k: v for k, v in (item or {}).items() if _SUM_ATTRIBUTE.fullmatch(k)}


def recount(item: Mapping[str, Any] | None, bucket: Bucket, events: Iterable[Event]) -> dict[str, dict[str, Any]]:
    """The sums attributes the item must hold for the events it counts (see the module's rules)."""
    stored = dict(item or {})
    events = list(events)
    carried = {name for event in events for name in event.values}
    # The slots of names no event carries are free for the others, as the names leave the item.
    slots = {slot: name for slot, name in dimension_keys.slots_of(stored).items() if name in carried}
    update = BucketUpdate(stored=slots)
    for event in events:
        update.add(bucket, event)
    wanted: dict[str, dict[str, Any]] = {}
    for name, slot in update.slots.items():
        wanted[dimension_keys.slot_name_attribute(slot)] = {"S": name}
    for attribute, amount in update.sums.items():
        wanted[attribute] = {"N": str(amount)}
    if update.unsummed:
        wanted[dimension_keys.NOT_SUMMED] = {"N": str(update.unsummed)}
    return wanted


def change(item: Mapping[str, Any] | None, wanted: Mapping[str, dict[str, Any]]) -> SumsChange:
    """What to SET and REMOVE on the stored item for its sums attributes to be `wanted`
    (numbers compared as numbers: DynamoDB stores them normalized)."""
    stored = stored_sums(item)
    sets = {k: v for k, v in sorted(wanted.items()) if k not in stored or not _same(stored[k], v)}
    return SumsChange(sets, tuple(sorted(set(stored) - set(wanted))))


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if "N" in a and "N" in b:
        return Decimal(str(a["N"])) == Decimal(str(b["N"]))
    return a == b
