"""A recounted bucket item's sums, and what to change on the stored item to make them so (the
repair, repair.py). Pure. Why a second run changes nothing: docs/counting.md, "Repair" (Sums)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from chalicelib.core.timebuckets import Bucket
from chalicelib.counters import layout
from chalicelib.counters.bucket_writes import BucketUpdate
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


def recount(item: Mapping[str, Any] | None, bucket: Bucket, events: list[Event]) -> dict[str, dict[str, Any]]:
    """The sums attributes the item must hold for the events it counts (see the module's rules)."""
    carried = {name for event in events for name in event.values}
    # The slots of names no event carries are free for the others, as the names leave the item.
    slots = {slot: name for slot, name in layout.slots_of(item or {}).items() if name in carried}
    update = BucketUpdate(stored=slots)
    for event in events:
        update.add(bucket, event)
    wanted = {layout.slot_name_attribute(slot): {"S": name} for name, slot in update.slots.items()}
    wanted |= {attribute: {"N": str(amount)} for attribute, amount in update.sums.items()}
    if update.unsummed:
        wanted[layout.NOT_SUMMED] = {"N": str(update.unsummed)}
    return wanted


def change(item: Mapping[str, Any] | None, wanted: Mapping[str, dict[str, Any]]) -> SumsChange:
    """What to SET and REMOVE on the stored item for its sums attributes (names, sums and `vx`) to
    be `wanted` (numbers compared as numbers: DynamoDB stores them normalized)."""
    stored = {k: v for k, v in (item or {}).items() if _SUM_ATTRIBUTE.fullmatch(k)}
    sets = {k: v for k, v in sorted(wanted.items()) if k not in stored or not _same(stored[k], v)}
    return SumsChange(sets, tuple(sorted(set(stored) - set(wanted))))


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if "N" in a and "N" in b:
        return Decimal(str(a["N"])) == Decimal(str(b["N"]))
    return a == b
