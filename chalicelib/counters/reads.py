"""Windowed counts and histograms, read from the day and hour items bucket_writes.py writes (with a
day's inline minutes), in UTC or per local bucket of a zone. What an answer counts and why a day
outlives its hours: docs/counting.md, "Retention" and "Inline minutes"; zones: docs/api.md, "Time
zones, calendar windows and comparisons"; what a local series reads: docs/benchmarks.md, "Local time series"."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from functools import partial
from typing import Any
from zoneinfo import ZoneInfo

from chalicelib.core import attributes, decimals, dynamo, keyspace, timebuckets, times, window_params, zones
from chalicelib.core.aws import DynamoDB
from chalicelib.core.settings import Settings
from chalicelib.counters import filters, layout, topk


@dataclass(frozen=True)
class WindowCount:
    counter: str
    count: int
    first_minute: int
    last_minute: int
    keys_read: int
    complete: bool
    retained_from_ms: int
    sums: dict[str, Decimal] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)
    unsummed: int = 0  # values the items read left unsummed (no slot for their name)

    def as_dict(self, label: times.Label = times.utc_label) -> dict[str, Any]:
        """The answer's JSON body; `label` writes its start and end (epoch minutes)."""
        return {
            "counter": self.counter,
            "count": self.count,
            **sums_fields(self.sums),
            "start": label(self.first_minute),
            "end": label(self.last_minute + 1),
            "keys_read": self.keys_read,
            **timebuckets.completeness(self.complete, self.retained_from_ms),
            **({"where": dict(self.where)} if self.where else {}),
            **({"sums_complete": False} if self.unsummed else {}),
        }


def sums_fields(sums: Mapping[str, Decimal]) -> dict[str, Any]:
    """What every answer says of sums: `sums` as JSON numbers, and `sums_exact` as decimal strings of
    every digit (docs/counting.md, "Dimensions, values, filters and breakdowns")."""
    return {
        "sums": {name: int(v) if v == v.to_integral_value() else v for name, v in sorted(sums.items())},
        "sums_exact": {name: format(v.normalize(decimals.EXACT), "f") for name, v in sorted(sums.items())},
    }


def count_window(
    dynamodb: DynamoDB,
    settings: Settings,
    counter: str,
    first_minute: int,
    last_minute: int,
    now_ms: int,
    where: Mapping[str, str] | None = None,
) -> WindowCount:
    """The count and sums of a counter's events in minutes first..last; with `where`, of its events
    having every one of those dimension values (docs/counting.md, "Filters (`where`)")."""
    window_params.check_minutes(first_minute, last_minute)
    filters.check_filter(where or {}, settings.filter_pairs)
    plan = _Plan.of(filters.read_pk(counter, where or {}), first_minute, last_minute)
    found = _batch_get(dynamodb, settings, plan.all_keys())
    tally = plan.tally(found, _assumed_retention(found.values(), settings), now_ms)
    return WindowCount(
        counter,
        first_minute=first_minute,
        last_minute=last_minute,
        keys_read=len(plan.all_keys()),
        where=dict(where or {}),
        **asdict(tally),
    )


@dataclass(frozen=True)
class _Tally:
    count: int
    sums: dict[str, Decimal]
    unsummed: int
    complete: bool
    retained_from_ms: int


@dataclass(frozen=True)
class _Plan:
    """The items a window of minutes is read from: one per part of its plan, and the days of its hours."""

    parts: list[timebuckets.Part]
    keys: list[dict[str, Any]]
    day_keys: dict[int, dict[str, Any]]
    end_ms: int

    @staticmethod
    def of(pk: str, first_minute: int, last_minute: int) -> _Plan:
        parts = timebuckets.plan(first_minute, last_minute)
        days = {timebuckets.day_of_hour(p.bucket.index) for p in parts if p.bucket.resolution == "hour"}
        return _Plan(
            parts,
            [layout.bucket_item_key(pk, p.bucket) for p in parts],
            {d: layout.bucket_item_key(pk, timebuckets.Bucket("day", d)) for d in sorted(days)},
            (last_minute + 1) * timebuckets.MINUTE_MS,
        )

    def all_keys(self) -> list[dict[str, Any]]:
        return self.keys + [k for k in self.day_keys.values() if k not in self.keys]

    def tally(self, found: Mapping[tuple[str, str], dict[str, Any]], assumed: int, now_ms: int) -> _Tally:
        """The window's count and sums from the items found (absent: none stored)."""
        items = [found.get(attributes.key_of(key)) for key in self.keys]
        days = {d: found.get(attributes.key_of(key)) for d, key in self.day_keys.items()}
        first, counted = _kept_parts(self.parts, items, days, assumed, now_ms // 1000)
        sums: dict[str, Decimal] = {}
        for _, part_sums, _ in counted:
            topk.add_sums(sums, part_sums)
        retained_from = _part_start_ms(self.parts[first]) if first < len(self.parts) else self.end_ms
        return _Tally(sum(c[0] for c in counted), sums, sum(c[2] for c in counted), first == 0, retained_from)


def _kept_parts(
    parts: list[timebuckets.Part],
    items: list[dict[str, Any] | None],
    days: Mapping[int, dict[str, Any] | None],
    assumed: int,
    now_s: int,
    whole_hours: bool = False,
) -> tuple[int, list[tuple[int, dict[str, Decimal], int]]]:
    """The first of the parts kept, and from it each part's count, sums and values unsummed, an
    hour's with what its day item (of `days`, by day index) holds inline of it."""

    def inline(part: timebuckets.Part, minutes: tuple[int, int] | None) -> int:
        if part.bucket.resolution != "hour":
            return 0
        return _inline_kept(days.get(timebuckets.day_of_hour(part.bucket.index)), part.bucket, minutes, now_s)

    held = [inline(p, p.minutes) for p in parts]
    # The day items read count too: an hour whose events its day holds inline has no item (a
    # series judges an hour by all its inline minutes, a window by those it reads).
    flags = [
        timebuckets.kept(p.bucket, dynamo.stored_expiry(item), assumed, now_s)
        or (inline(p, None) if whole_hours else held_here) > 0
        for p, item, held_here in zip(parts, items, held)
    ]
    first = timebuckets.kept_from(flags)
    counted: list[tuple[int, dict[str, Decimal], int]] = []
    for part, item, held_here in zip(parts[first:], items[first:], held[first:]):
        if dynamo.live(item, now_s):
            sums = layout.sums_of(item, part.minutes, part.bucket.resolution)
            counted.append((held_here + _part_count(item, part), sums, layout.not_summed(item)))
        else:  # none, or an hour item past its own events' retention, kept for its inline minutes'
            counted.append((held_here, {}, 0))
    return first, counted


def _assumed_retention(items: Iterable[dict[str, Any] | None], settings: Settings) -> int:
    """The counter's retention, as far as the items read tell (absent items are judged by it)."""
    seen = [attributes.integer(item, "retention") for item in items if item is not None and "retention" in item]
    return max(seen, default=settings.default_retention_seconds)


def _part_start_ms(part: timebuckets.Part) -> int:
    offset = part.minutes[0] if part.minutes is not None else 0
    return (part.bucket.first_minute + offset) * timebuckets.MINUTE_MS


def _part_count(item: dict[str, Any], part: timebuckets.Part) -> int:
    if part.minutes is None:
        return attributes.integer(item, "n")
    first, last = part.minutes
    return sum(attributes.integer(item, layout.minute_attribute(m), 0) for m in range(first, last + 1))


def _inline_kept(
    day: dict[str, Any] | None, hour: timebuckets.Bucket, minutes: tuple[int, int] | None, now_s: int
) -> int:
    """The events of minutes first..last of an hour (all of it: None) that its day item holds
    inline, while they are kept: by the day's retention (docs/counting.md, "Inline minutes")."""
    first, last = minutes if minutes is not None else (0, 59)
    held = sum(k for m, k in layout.hour_inline(day, hour).items() if first <= m <= last)
    retention = attributes.integer(day, "retention", 0) if day is not None else 0
    return held if held and timebuckets.expires_at_s(hour, retention) > now_s else 0


def _batch_get(
    dynamodb: DynamoDB, settings: Settings, keys: list[dict[str, Any]]
) -> dict[tuple[str, str], dict[str, Any]]:
    return attributes.by_key(dynamo.batch_get_items(dynamodb, settings.counts_table, keys, "could not read the counts"))


def histogram(
    dynamodb: DynamoDB,
    settings: Settings,
    counter: str,
    first_minute: int,
    last_minute: int,
    resolution: zones.LocalResolution,
    now_ms: int,
    where: Mapping[str, str] | None = None,
    zone: ZoneInfo | None = None,
) -> dict[str, Any]:
    """Counts and sums per bucket; with `where`, of the events having those dimension values; with
    `zone`, per local bucket (zones.buckets), labelled on its clock."""
    filters.check_filter(where or {}, settings.filter_pairs)
    stored = resolution if resolution in ("minute", "hour", "day") else None  # a resolution stored as such
    if zone is None and stored is not None:
        window_params.check_histogram(timebuckets.bucket_count(first_minute, last_minute, stored))
        return _stored_histogram(dynamodb, settings, counter, first_minute, last_minute, stored, now_ms, where)
    window_params.check_histogram(zones.nominal_count(first_minute, last_minute, resolution))
    zone = zone or zones.parse(None)
    local = zones.buckets(zone, first_minute, last_minute, resolution)
    size = timebuckets.RESOLUTION_MINUTES[stored] if stored is not None else 0
    if stored is not None and all(
        b.first_minute % size == 0 and b.last_minute - b.first_minute == size - 1 for b in local
    ):
        answer = _stored_histogram(
            dynamodb, settings, counter, first_minute, last_minute, stored, now_ms, where, partial(zones.label, zone)
        )
    else:
        answer = _local_histogram(dynamodb, settings, counter, local, resolution, now_ms, where, zone)
    return {**answer, "tz": zone.key}


def _local_histogram(
    dynamodb: DynamoDB,
    settings: Settings,
    counter: str,
    buckets: list[zones.LocalBucket],
    resolution: zones.LocalResolution,
    now_ms: int,
    where: Mapping[str, str] | None,
    zone: ZoneInfo,
) -> dict[str, Any]:
    """Each local bucket counted as count_window counts its minutes, from one read of them all."""
    pk = filters.read_pk(counter, where or {})
    plans = [_Plan.of(pk, b.first_minute, b.last_minute) for b in buckets]
    found = _fetch_plans(dynamodb, settings, pk, plans)
    assumed = _assumed_retention(found.values(), settings)
    tallies = [plan.tally(found, assumed, now_ms) for plan in plans]
    first = timebuckets.kept_from([t.complete for t in tallies])
    end = buckets[-1].last_minute + 1
    retained_from = buckets[first].first_minute if first < len(buckets) else end
    counted = [_Tally(0, {}, 0, True, 0)] * first + tallies[first:]
    return {
        "counter": counter,
        "resolution": resolution,
        "start": buckets[0].start,
        "end": zones.label(zone, end),
        "buckets": [{"start": b.start, "count": t.count, **sums_fields(t.sums)} for b, t in zip(buckets, counted)],
        **timebuckets.completeness(first == 0, retained_from * timebuckets.MINUTE_MS),
        **({"where": dict(where)} if where else {}),
    }


# Past a BatchGetItem's 100 keys, the hour items of a local series that are at least half of their
# range are read by one Query of it, not key by key: docs/guarantees.md, "A Query is charged on the
# total size of what it reads".
DENSE_HOUR_KEYS = 100


def _fetch_plans(
    dynamodb: DynamoDB, settings: Settings, pk: str, plans: list[_Plan]
) -> dict[tuple[str, str], dict[str, Any]]:
    needed = {(p.bucket.resolution, p.bucket.index) for plan in plans for p in plan.parts}
    needed |= {("day", d) for plan in plans for d in plan.day_keys}
    hours = sorted(i for r, i in needed if r == "hour")
    if len(hours) > DENSE_HOUR_KEYS and 2 * len(hours) >= hours[-1] - hours[0] + 1:
        days = sorted(i for r, i in needed if r == "day")
        found = [item for _, item in _query_range(dynamodb, settings, pk, "hour", hours[0], hours[-1])]
        found += [item for _, item in _query_range(dynamodb, settings, pk, "day", days[0], days[-1])]
        return attributes.by_key(found)
    keys = [layout.bucket_item_key(pk, timebuckets.Bucket(r, i)) for r, i in sorted(needed)]
    return _batch_get(dynamodb, settings, keys)


def _stored_histogram(
    dynamodb: DynamoDB,
    settings: Settings,
    counter: str,
    first_minute: int,
    last_minute: int,
    resolution: timebuckets.Resolution,
    now_ms: int,
    where: Mapping[str, str] | None = None,
    label: times.Label = times.utc_label,
) -> dict[str, Any]:
    """Counts and sums per stored bucket (a minute's from its hour item), from one Query of them."""
    buckets = timebuckets.buckets_between(first_minute, last_minute, resolution)
    # Minutes live inside their hour items: a minute series is read from hour items.
    stored: timebuckets.Resolution = "hour" if resolution == "minute" else resolution
    size = timebuckets.RESOLUTION_MINUTES[stored]
    pk = filters.read_pk(counter, where or {})
    lo, hi = buckets[0].first_minute, buckets[-1].first_minute
    items = dict(_query_range(dynamodb, settings, pk, stored, lo // size, hi // size))
    # Minutes a day item holds inline belong to its hours (one more Query, of the days spanned).
    day = timebuckets.DAY_MINUTES
    day_items = dict(_query_range(dynamodb, settings, pk, "day", lo // day, hi // day)) if stored == "hour" else {}
    assumed = _assumed_retention([*items.values(), *day_items.values()], settings)
    # Each bucket as the part of the stored item that holds it: a minute of its hour item (one
    # object an hour), else the bucket itself.
    if resolution == "minute":
        hours = {i: timebuckets.Bucket(stored, i) for i in {b.first_minute // size for b in buckets}}
        parts = [timebuckets.Part(hours[b.first_minute // size], (b.first_minute % size,) * 2) for b in buckets]
    else:
        parts = [timebuckets.Part(b) for b in buckets]
    stored_items = [items.get(p.bucket.index) for p in parts]
    first, counted = _kept_parts(parts, stored_items, day_items, assumed, now_ms // 1000, whole_hours=True)
    counts = {b.index: n for b, (n, _, _) in zip(buckets[first:], counted)}
    sums = {b.index: s for b, (_, s, _) in zip(buckets[first:], counted)}
    retained_from = buckets[first].start_ms if first < len(buckets) else buckets[-1].end_ms
    return {
        "counter": counter,
        "resolution": resolution,
        **timebuckets.series(
            buckets,
            lambda b: {"count": counts.get(b.index, 0), **sums_fields(sums.get(b.index, {}))},
            lambda ms: label(ms // timebuckets.MINUTE_MS),
        ),
        **timebuckets.completeness(first == 0, retained_from),
        **({"where": dict(where)} if where else {}),
    }


def _query_range(
    dynamodb: DynamoDB, settings: Settings, pk: str, resolution: timebuckets.Resolution, lo: int, hi: int
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Stored buckets of one resolution with indexes lo..hi, expired ones included (paginated Query)."""
    items = dynamo.query_sort_range(
        dynamodb,
        settings.counts_table,
        pk,
        layout.bucket_sort_key(resolution, lo),
        layout.bucket_sort_key(resolution, hi),
        "could not read the counts",
    )
    for item in items:
        yield keyspace.sort_key_index(attributes.sort_key(item)), item
