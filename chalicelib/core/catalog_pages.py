"""Packed catalog entries (lines of `name<TAB>last_seen ms<TAB>expiry s`, zlib-compressed in one
binary attribute), their merge by name and how a fold lays them out in pages. Pure. Why a name
written twice is one entry: docs/design.md, "Which names exist"."""

from __future__ import annotations

import bisect
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

# A page's bytes of entries before compression (why this size: docs/design.md, "Which names exist").
PAGE_RAW_BYTES = 24_000
# A log item likewise (a batch with more new names writes more than one log item).
LOG_RAW_BYTES = 96_000


@dataclass(frozen=True)
class Listed:
    """One name of a catalog: when it was last seen (epoch ms), until when it is listed (epoch s; None: for ever)."""

    name: str
    last_seen_ms: int
    expires_s: int | None

    def live(self, now_s: int) -> bool:
        return self.expires_s is None or self.expires_s > now_s

    def line(self) -> str:
        return f"{self.name}\t{self.last_seen_ms}\t{'' if self.expires_s is None else self.expires_s}"


def merged(a: Listed, b: Listed) -> Listed:
    """The entry of a name written twice: seen at the later time, listed for the longer life."""
    expires = None if a.expires_s is None or b.expires_s is None else max(a.expires_s, b.expires_s)
    return Listed(a.name, max(a.last_seen_ms, b.last_seen_ms), expires)


def union(*groups: Iterable[Listed]) -> dict[str, Listed]:
    """Every name of the groups once (merged), by name."""
    out: dict[str, Listed] = {}
    for group in groups:
        for entry in group:
            held = out.get(entry.name)
            out[entry.name] = entry if held is None else merged(held, entry)
    return out


def pack(entries: Iterable[Listed]) -> bytes:
    """Entries in name order, compressed."""
    text = "\n".join(e.line() for e in sorted(entries, key=lambda e: e.name))
    return zlib.compress(text.encode("utf-8"), 9)


def unpack(data: bytes) -> list[Listed]:
    """The entries `pack` stored, in name order; ValueError for anything else."""
    try:
        text = zlib.decompress(data).decode("utf-8")
    except (zlib.error, UnicodeDecodeError) as exc:
        raise ValueError("not a packed catalog entry list") from exc
    rows = (line.split("\t") for line in text.split("\n")) if text else ()
    return [Listed(name, int(last), int(expires) if expires else None) for name, last, expires in rows]


def chunks(entries: Sequence[Listed], most_bytes: int) -> list[list[Listed]]:
    """Entries (in order) cut into runs of at most `most_bytes` of lines each (a run holds at
    least one entry); no run for no entries."""
    runs: list[list[Listed]] = []
    size = most_bytes + 1
    for entry in entries:
        line = len(entry.line().encode("utf-8")) + 1
        if size + line > most_bytes and (not runs or runs[-1]):
            runs.append([])
            size = 0
        runs[-1].append(entry)
        size += line
    return runs


def assign(lows: Sequence[str], names: Iterable[str]) -> dict[str, list[str]]:
    """Each name under the page whose range holds it: the page with the greatest low bound at or
    below the name (`lows` sorted, the first ""), so pages' ranges tile every name."""
    out: dict[str, list[str]] = {low: [] for low in lows}
    for name in sorted(names):
        out[lows[bisect.bisect_right(lows, name) - 1]].append(name)
    return out


@dataclass(frozen=True)
class Layout:
    """What a fold writes: pages (low bound -> entries) to write, and low bounds to delete."""

    write: dict[str, list[Listed]]
    delete: list[str]


def layout(stored: Mapping[str, list[Listed]], entries: Mapping[str, Listed], most_bytes: int) -> Layout:
    """The pages after a fold, from `stored` (each page's low bound to its entries; the "" page is
    assumed) and `entries` (all the catalog lists now): docs/design.md, "Which names exist"; a page
    left empty is deleted, but the first."""
    lows = sorted({"", *stored})
    placed = assign(lows, entries)
    write: dict[str, list[Listed]] = {}
    delete: list[str] = []
    for low in lows:
        now = [entries[name] for name in placed[low]]
        if low not in stored and not now:
            continue
        held = sorted(stored[low], key=lambda e: e.name) if low in stored else None
        if now == held:
            continue
        if not now:
            if low == "":
                write[low] = []
            else:
                delete.append(low)
            continue
        runs = chunks(now, most_bytes)
        if runs[0] != held:  # a page that only had names split off keeps its item as it is
            write[low] = runs[0]
        for run in runs[1:]:
            write[run[0].name] = run
    return Layout(write, delete)
