"""Top URLs: one bucket's heavy-hitters summary, how a window's summaries merge, and how the most
viewed URLs are picked with exact counts. Pure. docs/design.md, "Top URLs"."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from chalicelib.core.timebuckets import RESOLUTION_MINUTES, Bucket
from chalicelib.views.windows import LEVELS, plan

CAPACITY = 1000
DEFAULT_LIMIT, MAX_LIMIT = 10, 1000  # URLs one answer lists
EXTRA_EXAMINED = 100  # candidates an answer may examine past `limit` (their exact views read)
DIGEST_BYTES = 8
COUNT_BYTES = 5  # counts up to 2**40 - 1 views per URL and bucket
ENTRY_BYTES = DIGEST_BYTES + COUNT_BYTES
MAX_COUNT = 2 ** (8 * COUNT_BYTES) - 1
# A summary item: the packed entries plus its key and a few small attributes (top_store).
MAX_ITEM_BYTES = 16 * 1024
assert CAPACITY * ENTRY_BYTES + 200 < MAX_ITEM_BYTES
# The most summaries a 400-day window reads (docs/design.md, "Top URLs"; tests/unit/views/test_view_top.py).
MAX_SPANS = 118
MAX_BLOCKS = 14  # the 32-day blocks those spans lie in (same test)
MIN_CHUNK, MAX_CHUNK = 5, 100  # candidates resolved at once


def digest_of_sha(sha_hex: str) -> bytes:
    """A URL's digest in a summary, from the sha256 (hex) that keys its items."""
    return bytes.fromhex(sha_hex[: 2 * DIGEST_BYTES])


@dataclass
class Summary:
    """One bucket's heavy hitters: digest -> views (snapshots), and the most views of any URL
    it does not hold."""

    entries: dict[bytes, int] = field(default_factory=dict)
    floor: int = 0
    capacity: int = CAPACITY

    def observe(self, digest: bytes, count: int) -> bool:
        """Take one snapshot of a URL's views in the bucket; whether the summary changed."""
        if len(digest) != DIGEST_BYTES:
            raise ValueError("a digest is 8 bytes")
        if count <= 0:
            return False
        count = min(count, MAX_COUNT)
        if digest in self.entries or len(self.entries) < self.capacity:
            if count <= self.entries.get(digest, 0):
                return False
            self.entries[digest] = count
            return True
        lowest = min(self.entries, key=lambda d: (self.entries[d], d))
        if count > self.entries[lowest]:
            self.floor = max(self.floor, self.entries.pop(lowest))
            self.entries[digest] = count
            return True
        if count > self.floor:
            self.floor = count
            return True
        return False

    def encode(self) -> bytes:
        """Entries packed in digest order: 8 bytes of digest, 5 of count, each."""
        return b"".join(d + self.entries[d].to_bytes(COUNT_BYTES, "big") for d in sorted(self.entries))

    @classmethod
    def decode(cls, packed: bytes, floor: int = 0) -> Summary:
        if len(packed) % ENTRY_BYTES:
            raise ValueError("a packed summary is a whole number of entries")
        entries = {
            packed[i : i + DIGEST_BYTES]: int.from_bytes(packed[i + DIGEST_BYTES : i + ENTRY_BYTES], "big")
            for i in range(0, len(packed), ENTRY_BYTES)
        }
        return cls(entries, floor)


def block_of(span: Bucket) -> Bucket:
    """The 32-day block a bucket lies in (its summary's logs are kept there: top_store)."""
    return Bucket("block", span.first_minute // RESOLUTION_MINUTES["block"])


def cover(first_hour: int, last_hour: int) -> list[Bucket]:
    """Hours first..last as whole blocks, days and hours in time order: windows.plan's parts, split."""
    spans: list[Bucket] = []
    for part in plan(first_hour * 60, (last_hour + 1) * 60 - 1):
        if part.inner is None:
            spans.append(part.span)
            continue
        finer = LEVELS[LEVELS.index(part.span.resolution) - 1]  # never an hour's minutes: whole hours
        offset = part.span.first_minute // RESOLUTION_MINUTES[finer]
        spans += [Bucket(finer, offset + i) for i in range(part.inner[0], part.inner[1] + 1)]
    return spans


@dataclass(frozen=True)
class Candidate:
    digest: bytes
    lower: int  # the views the summaries hold for it
    upper: int  # the most views it can have in the window


@dataclass
class Merged:
    """A window's summaries merged: every URL any of them holds, and what any other may have."""

    candidates: list[Candidate]  # by upper bound, highest first
    missed: int  # the most views a URL no summary holds can have


def merge(summaries: Iterable[Summary]) -> Merged:
    lower: dict[bytes, int] = {}
    excess: dict[bytes, int] = {}
    missed = 0
    for summary in summaries:
        missed += summary.floor
        for digest, held in summary.entries.items():
            lower[digest] = lower.get(digest, 0) + held
            excess[digest] = excess.get(digest, 0) + max(0, held - summary.floor)
    candidates = [Candidate(d, lower[d], missed + excess[d]) for d in lower]
    candidates.sort(key=lambda c: (-c.upper, -c.lower, c.digest))
    return Merged(candidates, missed)


# What a batch of candidates turns out to be: for each digest, the URLs with it (one, but for a
# digest collision; none when the URL is unknown or outside the prefix asked for) and their
# exact views in the window.
Resolve = Callable[[Sequence[bytes]], dict[bytes, list[tuple[str, int]]]]


@dataclass
class Selection:
    urls: list[tuple[str, int]]  # (url, views), views descending, then url
    exact: bool
    bound: int  # the most views a URL not listed may have
    others: tuple[int, int]  # (urls, views) known beyond the list
    others_complete: bool  # whether `others` counts every URL beyond the list


def select(merged: Merged, limit: int, resolve: Resolve, max_examined: int, filtered: bool = False) -> Selection:
    """The `limit` most viewed URLs with exact counts (docs/design.md, "Top URLs"); `filtered`: `resolve`
    leaves some URLs out (a prefix), so those never resolved are not counted in `others`."""
    found: list[tuple[str, int]] = []
    index = 0
    order = merged.candidates
    while index < len(order):
        kth = _kth(found, limit)
        if index >= max_examined or (kth is not None and order[index].upper <= kth):
            break
        # As many as the list still lacks (at least a few, at most one BatchGetItem's worth).
        size = min(max(limit - len(found), MIN_CHUNK), MAX_CHUNK)
        batch = [c.digest for c in order[index : min(index + size, len(order), max_examined)]]
        for urls in resolve(batch).values():
            found.extend((url, views) for url, views in urls if views > 0)
        index += len(batch)
    found.sort(key=lambda uv: (-uv[1], uv[0]))
    listed, beyond = found[:limit], found[limit:]
    next_upper = order[index].upper if index < len(order) else 0
    bound = max(merged.missed, next_upper, beyond[0][1] if beyond else 0)
    kth = _kth(found, limit)
    exact = bound == 0 if kth is None else bound <= kth
    unexamined = [] if filtered else order[index:]
    others = (len(beyond) + len(unexamined), sum(v for _, v in beyond) + sum(c.lower for c in unexamined))
    return Selection(listed, exact, bound, others, merged.missed == 0 and (not filtered or index == len(order)))


def _kth(found: list[tuple[str, int]], limit: int) -> int | None:
    """The views of the limit-th most viewed URL found so far; None while fewer were found."""
    if len(found) < limit:
        return None
    return sorted((v for _, v in found), reverse=True)[limit - 1]
