"""Which events-table partitions and sort-key conditions hold the events ingested in `[start, end)`, and report ids.
Pure. Why the conditions select the range exactly: docs/design.md, "Reports" ("What a run covers")."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from chalicelib.core import times
from chalicelib.core.errors import ValidationError
from chalicelib.events import ingest as events

ID_PATTERN = re.compile(r"(\d{8}T\d{6})(\d{3})Z-(\d{8}T\d{6})(\d{3})Z")


@dataclass(frozen=True)
class PartitionQuery:
    """One Query: a partition and optional sort-key bounds (low inclusive, high exclusive)."""

    pk: str
    low: str | None = None
    high: str | None = None

    def sort_condition(self) -> tuple[str, dict[str, str]]:
        """The condition on the sort key (empty: the whole partition) and its placeholders' values."""
        values = {k: v for k, v in ((":low", self.low), (":high", self.high)) if v is not None}
        # BETWEEN is inclusive, but no sort key equals `high` (each carries '#suffix').
        conditions = {(":low", ":high"): "sk BETWEEN :low AND :high", (":low",): "sk >= :low", (":high",): "sk < :high"}
        return conditions.get(tuple(values), ""), values


def quarter_queries(start_ms: int, end_ms: int, shards: int) -> list[tuple[int, list[PartitionQuery]]]:
    """Per quarter hour overlapping [start_ms, end_ms), in time order: its start and the Queries
    (one per write shard) that read exactly its events ingested in the range."""
    if end_ms <= start_ms:
        return []
    quarters: list[tuple[int, list[PartitionQuery]]] = []
    for quarter in range(start_ms - start_ms % times.QUARTER_HOUR_MS, end_ms, times.QUARTER_HOUR_MS):
        low = times.iso(start_ms) if start_ms > quarter else None
        high = times.iso(end_ms) if end_ms < quarter + times.QUARTER_HOUR_MS else None
        quarters.append((quarter, [PartitionQuery(events.partition_key(quarter, s), low, high) for s in range(shards)]))
    return quarters


def first_start(cutoff_ms: int, interval_minutes: int) -> int:
    """Where the very first report starts: one interval back from the cutoff, on a quarter hour."""
    back = cutoff_ms - interval_minutes * times.MINUTE_MS
    return back - back % times.QUARTER_HOUR_MS


def report_id(start_ms: int, end_ms: int) -> str:
    """'20261121T230000000Z-20261122T000000000Z': fixed width, so ids sort by start time."""
    return f"{times.compact(start_ms)}-{times.compact(end_ms)}"


def parse_report_id(text: Any) -> tuple[int, int]:
    """(start_ms, end_ms) of a report id; ValidationError if it is not one."""
    match = ID_PATTERN.fullmatch(text) if isinstance(text, str) else None
    if not match:
        raise ValidationError("a report id looks like 20261121T230000000Z-20261122T000000000Z")
    try:
        start = times.parse_compact(match.group(1), match.group(2))
        end = times.parse_compact(match.group(3), match.group(4))
    except ValueError as exc:
        raise ValidationError(f"the report id holds an impossible time: {text}") from exc
    if end <= start:
        raise ValidationError("a report id ends after it starts")
    return start, end
