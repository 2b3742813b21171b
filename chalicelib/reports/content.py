"""What a report says: per counter, the events and the exact sums of numeric attributes (added in
core.decimals.EXACT), as JSON (`sums`, `sums_exact`) and CSV. Pure. docs/design.md, "Reports"."""

from __future__ import annotations

import csv
import io
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from chalicelib.core import times
from chalicelib.core.decimals import EXACT

# A spreadsheet runs a cell starting with one of these as a formula: `cell` escapes it.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
ESCAPE = "'"
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")


@dataclass
class CounterTotals:
    events: int = 0
    sums: dict[str, Decimal] = field(default_factory=lambda: defaultdict(Decimal))


@dataclass
class Report:
    id: str
    start_ms: int
    end_ms: int
    counters: dict[str, CounterTotals] = field(default_factory=dict)

    @property
    def events(self) -> int:
        return sum(c.events for c in self.counters.values())

    def add(self, items: Iterable[Mapping[str, Any]]) -> None:
        """Add deserialized events-table items; numbers arrive as Decimals, booleans as bools."""
        for item in items:
            totals = self.counters.setdefault(str(item["counter"]), CounterTotals())
            totals.events += 1
            for name, value in (item.get("attributes") or {}).items():
                if isinstance(value, Decimal):
                    totals.sums[name] = EXACT.add(totals.sums[name], value)

    def summary(self) -> dict[str, Any]:
        return {"id": self.id, "start": times.iso(self.start_ms), "end": times.iso(self.end_ms), "events": self.events}

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.summary(),
            "counters": {
                name: {
                    "events": totals.events,
                    "sums": {k: _json_number(v) for k, v in sorted(totals.sums.items())},
                    "sums_exact": {k: _text(v) for k, v in sorted(totals.sums.items())},
                }
                for name, totals in sorted(self.counters.items())
            },
        }

    def as_csv(self) -> str:
        """One row per counter: counter, events, then one column per summed attribute."""
        attributes = sorted({name for totals in self.counters.values() for name in totals.sums})
        out = io.StringIO()
        # CRLF (RFC 4180): only then does Python's writer quote a cell holding a carriage return.
        writer = csv.writer(out, lineterminator="\r\n")
        writer.writerow([cell(text) for text in ("counter", "events", *attributes)])
        for name, totals in sorted(self.counters.items()):
            row = (name, str(totals.events), *(_text(totals.sums.get(a)) for a in attributes))
            writer.writerow([cell(text) for text in row])
        return out.getvalue()


def cell(text: str) -> str:
    """The text as a CSV cell no spreadsheet runs (docs/design.md, Reports, "CSV cells")."""
    if text.startswith(ESCAPE) or (text.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(text)):
        return ESCAPE + text
    return text


def _json_number(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


def _text(value: Decimal | None) -> str:
    """Every digit, in positional notation: 1E+3 is "1000", 0.30 stays "0.30"."""
    return "" if value is None else format(value, "f")
