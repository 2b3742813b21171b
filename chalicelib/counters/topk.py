"""Breakdown summaries: values of one dimension with their counts and sums, bounded in bytes,
mergeable over a window (Space-Saving, MAX_BYTES). Pure. Bounds: docs/counting.md,
"Breakdowns"."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from chalicelib.core.decimals import EXACT

MAX_BYTES = 14_000  # with the item's key, positions and expiry, under 16 KB ("Breakdowns")


@dataclass
class Entry:
    count: int
    err: int = 0
    sums: dict[str, Decimal] = field(default_factory=dict)


@dataclass
class Summary:
    entries: dict[str, Entry] = field(default_factory=dict)
    floor: int = 0

    def add(self, value: str, count: int, sums: Mapping[str, Decimal]) -> None:
        entry = self.entries.setdefault(value, Entry(self.floor, self.floor))
        entry.count += count
        add_sums(entry.sums, sums)

    def fit(self, max_bytes: int | None = None) -> int:
        """Evict the smallest entries until the encoding fits in max_bytes (MAX_BYTES); returns how many went."""
        max_bytes = MAX_BYTES if max_bytes is None else max_bytes
        size = encoded_size(self)
        if size <= max_bytes:
            return 0
        listed = len(self.entries)
        for value, entry in sorted(self.entries.items(), key=lambda kv: (kv[1].count, kv[0])):
            if size <= max_bytes:
                break
            size -= len(_entry_json(value, entry).encode("utf-8")) + 1
            del self.entries[value]
            self.floor = max(self.floor, entry.count)
        return listed - len(self.entries)


def add_sums(into: dict[str, Decimal], sums: Mapping[str, Decimal]) -> None:
    """Add `sums` into `into`, name by name, exactly."""
    for name, amount in sums.items():
        into[name] = EXACT.add(into.get(name, Decimal(0)), amount)


def _entry_json(value: str, entry: Entry) -> str:
    row: list[object] = [value, entry.count, entry.err]
    if entry.sums:
        row.append({k: _text(v) for k, v in sorted(entry.sums.items())})
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"))


def _text(amount: Decimal) -> str:
    return format(amount.normalize(EXACT), "f") if amount == amount.to_integral_value() else str(amount)


def encode(summary: Summary) -> str:
    rows = ",".join(_entry_json(v, e) for v, e in sorted(summary.entries.items()))
    return f'{{"f":{summary.floor},"e":[{rows}]}}'


def decode(text: str) -> Summary:
    raw = json.loads(text)
    summary = Summary(floor=int(raw["f"]))
    for row in raw["e"]:
        sums = {k: Decimal(v) for k, v in (row[3] if len(row) > 3 else {}).items()}
        summary.entries[row[0]] = Entry(int(row[1]), int(row[2]), sums)
    return summary


def merge(a: Summary, b: Summary) -> Summary:
    """Two summaries of disjoint events of one bucket as one (docs/counting.md, "Breakdowns")."""
    out = Summary(floor=a.floor + b.floor)
    for value in sorted(a.entries.keys() | b.entries.keys()):
        ea, eb = a.entries.get(value, Entry(a.floor, a.floor)), b.entries.get(value, Entry(b.floor, b.floor))
        sums = dict(ea.sums)
        add_sums(sums, eb.sums)
        out.entries[value] = Entry(ea.count + eb.count, ea.err + eb.err, sums)
    return out


def encoded_size(summary: Summary) -> int:
    """Bytes of the summary's encoding (what MAX_BYTES bounds)."""
    return len(encode(summary).encode("utf-8"))


def within(summary: Summary, first: int, last: int) -> Summary:
    """A summary of minute entries cut to minutes first..last, as one of values (docs/counting.md, "Breakdowns")."""
    span = last - first + 1
    cut = Summary(floor=summary.floor * span)
    for key, entry in summary.entries.items():
        minute, value = int(key[:2]), key[2:]
        if first <= minute <= last:
            # A value starts at the floor of every minute, all of it error; a minute listing it has its entry instead.
            into = cut.entries.setdefault(value, Entry(cut.floor, cut.floor))
            into.count += entry.count - summary.floor
            into.err += entry.err - summary.floor
            add_sums(into.sums, entry.sums)
    return cut


# -- a window ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ranked:
    value: str
    count: int  # an upper bound; exact when the ranking is exact
    low: int  # a lower bound
    sums: dict[str, Decimal]


@dataclass(frozen=True)
class Ranking:
    values: list[Ranked]  # every value seen in some summary, by count descending, then value
    exact: bool
    missed_at_most: int  # the most events a value listed in no summary can have


def rank(buckets: Iterable[Iterable[Summary]]) -> Ranking:
    """Merge a window's summaries (`buckets`: per bucket, its parts' summaries, the largest floor
    of which is the bucket's); docs/counting.md, "Breakdowns"."""
    listed: dict[str, list[int]] = {}  # value -> [count less the floors of the buckets listing it, low]
    sums: dict[str, dict[str, Decimal]] = {}
    floors_total = 0
    for bucket in buckets:
        parts = list(bucket)
        floor = max((summary.floor for summary in parts), default=0)
        floors_total += floor
        for summary in parts:
            for value, entry in summary.entries.items():
                found = listed.setdefault(value, [0, 0])
                found[0] += entry.count - floor
                found[1] += entry.count - entry.err
                add_sums(sums.setdefault(value, {}), entry.sums)
    ranked = [Ranked(value, count + floors_total, low, sums[value]) for value, (count, low) in listed.items()]
    ranked.sort(key=lambda r: (-r.count, r.value))
    return Ranking(ranked, floors_total == 0, floors_total)
