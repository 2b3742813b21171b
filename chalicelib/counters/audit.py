"""The audit's arithmetic: which partitions to compare, and whether one adds up. Pure.
docs/counting.md, "The audit"."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from chalicelib.core import times
from chalicelib.counters import audit_items
from chalicelib.events import ingest as events

QUARTER_MS = times.QUARTER_HOUR_MS
# Bounded work per run: 4 hours of quarter hours (times the write shards); a run that falls
# behind catches up at 16 quarter hours per run.
MAX_QUARTERS_PER_RUN = 16
EVENTS_PK = re.compile(r"[0-9]{12}#[0-9]{1,3}")


def settled_before(now_ms: int, settle_minutes: int) -> int:
    """The end of the last quarter hour that has closed and settled at now_ms."""
    cutoff = now_ms - settle_minutes * times.MINUTE_MS
    return cutoff - cutoff % QUARTER_MS


def quarters_to_audit(checkpoint_ms: int, now_ms: int, settle_minutes: int, most: int) -> list[int]:
    """Start times of the settled quarter hours from the checkpoint on, at most `most`."""
    end = settled_before(now_ms, settle_minutes)
    start = checkpoint_ms - checkpoint_ms % QUARTER_MS
    return list(range(start, end, QUARTER_MS))[:most]


def partitions(quarter_start_ms: int, shards: int) -> list[str]:
    """The events partition keys of one quarter hour, one per write shard."""
    return [events.partition_key(quarter_start_ms, shard) for shard in range(shards)]


def quarter_of(events_pk: str) -> int:
    """Start (epoch ms) of the quarter hour an events partition key names; ValueError if none."""
    if not EVENTS_PK.fullmatch(events_pk):
        raise ValueError(f"not an events partition key: {events_pk!r}")
    return times.parse_quarter_hour(events_pk[:12])


@dataclass(frozen=True)
class Finding:
    """One partition compared: what is stored and what the counting path accounted for."""

    partition: str
    stored: int
    applied: int = 0
    set_aside: int = 0
    expired: int = 0
    duplicates: int = 0
    repaired: int = 0

    @property
    def accounted(self) -> int:
        return self.applied + self.set_aside + self.expired + self.duplicates + self.repaired

    @property
    def shortfall(self) -> int:
        """Events stored and not accounted for (negative: accounted more than stored)."""
        return self.stored - self.accounted

    @property
    def adds_up(self) -> bool:
        return self.shortfall == 0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "shortfall": self.shortfall}


def finding(partition: str, stored: int, numbers: dict[str, int]) -> Finding:
    """The finding for one partition from its stored count and its numbers (audit_items.ACCOUNTS)."""
    return Finding(partition, stored, **{name: numbers.get(name, 0) for name in audit_items.ACCOUNTS})


def total_shortfall(findings: list[Finding]) -> int:
    """Events missing over the partitions that fall short (excesses do not cancel them)."""
    return sum(max(0, f.shortfall) for f in findings)
