"""Windowed counts: a window read from its day and hour items, and histograms.

The buckets are written by chalicelib.counters.stream_apply; their keys are in chalicelib.counters.keys.

The rule. A bucket keeps its counts until its end plus the retention of its events
(`expires_at`, stored on the item; with mixed retentions the longest, see stream_apply). The
minutes of an hour live inside the hour's item, so they go with it. A day therefore outlives
its hours by up to a day: coarser buckets are kept longer, as time-series stores keep
downsampled data longer than raw points. Reads ignore a bucket past its expiry even before
DynamoDB deletes it.

What an answer says. A window is read as parts (days, hours, minutes of an hour; see
core.timebuckets.plan) and a histogram as buckets, both in time order. A part is *kept* when its
item is there and not expired, or when it is absent (no events) and would not have expired
yet by the counter's retention (the longest retention among the items read, or the default:
an absent item past that may have been deleted). The answer counts exactly the parts from the
first one after which every part is kept: `retained_from` is that part's start, `complete`
says it is the window's start. So `count` is always the number of events in
[retained_from, end), whatever the window's alignment; an older part that happens to be kept
(a day that outlives the hours around it, or a longer retention) is not added to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from chalicelib.core import attributes, decimals, dynamo, keyspace, timebuckets, times, window_params
from chalicelib.core.aws import DynamoDB
from chalicelib.core.clock import Sleep
from chalicelib.core.settings import Settings
from chalicelib.counters import dimension_keys
from chalicelib.counters import keys as counter_keys

# -- reads -------------------------------------------------------------------------------


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

    def as_dict(self) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "counter": self.counter,
            "count": self.count,
            **sums_fields(self.sums),
            "start": times.iso(self.first_minute * timebuckets.MINUTE_MS),
            "end": times.iso((self.last_minute + 1) * timebuckets.MINUTE_MS),
            "keys_read": self.keys_read,
            **timebuckets.completeness(self.complete, self.retained_from_ms),
        }
        if self.where:
            answer["where"] = dict(self.where)
        if self.unsummed:
            answer["sums_complete"] = False
        return answer


def json_sums(sums: Mapping[str, Decimal]) -> dict[str, Any]:
    """Sums as JSON numbers: integers exactly; others as decimals (a JSON number; readers that
    parse numbers as doubles see 15 significant digits of them)."""
    return {name: int(v) if v == v.to_integral_value() else v for name, v in sorted(sums.items())}


def exact_sums(sums: Mapping[str, Decimal]) -> dict[str, str]:
    """Sums as decimal strings holding every digit (`sums_exact`, beside `sums`): a reader that
    parses JSON numbers as doubles keeps 15-17 significant digits of `sums`, none are lost here."""
    return {name: format(v.normalize(decimals.EXACT), "f") for name, v in sorted(sums.items())}


def sums_fields(sums: Mapping[str, Decimal]) -> dict[str, Any]:
    """What every answer says of sums: `sums` (JSON numbers) and `sums_exact` (decimal strings)."""
    return {"sums": json_sums(sums), "sums_exact": exact_sums(sums)}


def count_window(
    dynamodb: DynamoDB,
    settings: Settings,
    counter: str,
    first_minute: int,
    last_minute: int,
    now_ms: int,
    sleep: Sleep | None = None,
    where: Mapping[str, str] | None = None,
) -> WindowCount:
    """The count and sums of a counter's events in minutes first..last; with `where`, of its
    events having every one of those dimension values (read from their filter counter: the same
    keys, so the same bound)."""
    window_params.check_minutes(first_minute, last_minute)
    dimension_keys.check_filter(where or {}, settings.filter_pairs)
    parts = timebuckets.plan(first_minute, last_minute)
    pk = dimension_keys.read_pk(counter, where or {})
    keys = [dimension_keys.bucket_item_key(pk, p.bucket) for p in parts]
    # The days of the hours read: a quiet counter's first minutes of a day are held in its day
    # item (counters/keys.py, INLINE_MAX), at most two more keys (the window's two ends).
    days = {timebuckets.day_of_hour(p.bucket.index) for p in parts if p.bucket.resolution == "hour"}
    day_keys = {d: dimension_keys.bucket_item_key(pk, timebuckets.Bucket("day", d)) for d in sorted(days)}
    extra = [k for k in day_keys.values() if k not in keys]
    found = _batch_get(dynamodb, settings, keys + extra, sleep)
    items = [found.get(attributes.key_of(key)) for key in keys]
    inline = {i: counter_keys.inline_minutes(found.get(attributes.key_of(k))) for i, k in day_keys.items()}
    # The day items read count too: an hour whose events its day holds inline has no item.
    assumed = _assumed_retention(found.values(), settings)
    now_s = now_ms // 1000
    day_items = {d: found.get(attributes.key_of(k)) for d, k in day_keys.items()}

    def held_inline(part: timebuckets.Part) -> int:
        return (
            _inline_count(inline[timebuckets.day_of_hour(part.bucket.index)], part)
            if part.bucket.resolution == "hour"
            else 0
        )

    def inline_kept(part: timebuckets.Part) -> bool:
        """An hour's inline minutes live by their day item's retention (its events' longest)."""
        day = day_items.get(timebuckets.day_of_hour(part.bucket.index)) if part.bucket.resolution == "hour" else None
        retention = attributes.integer(day, "retention", 0) if day is not None else 0
        return held_inline(part) > 0 and timebuckets.expires_at_s(part.bucket, retention) > now_s

    flags = [
        timebuckets.kept(p.bucket, dynamo.stored_expiry(item), assumed, now_s) or inline_kept(p)
        for p, item in zip(parts, items)
    ]
    first = timebuckets.kept_from(flags)
    total = 0
    unsummed = 0
    sums: dict[str, Decimal] = {}
    for part, item in zip(parts[first:], items[first:]):
        if inline_kept(part):
            total += held_inline(part)
        expiry = dynamo.stored_expiry(item)
        if item is None or (expiry is not None and expiry <= now_s):
            continue  # an hour item past its own events' retention, kept for its inline minutes'

        total += _part_count(item, part)
        unsummed += dimension_keys.not_summed(item)
        for name, amount in dimension_keys.sums_of(item, part.minutes, part.bucket.resolution).items():
            sums[name] = decimals.EXACT.add(sums.get(name, Decimal(0)), amount)
    end_ms = (last_minute + 1) * timebuckets.MINUTE_MS
    retained_from = _part_start_ms(parts[first]) if first < len(parts) else end_ms
    return WindowCount(
        counter,
        total,
        first_minute,
        last_minute,
        len(keys) + len(extra),
        first == 0,
        retained_from,
        sums,
        dict(where or {}),
        unsummed,
    )


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
    return sum(attributes.integer(item, counter_keys.minute_attribute(m), 0) for m in range(first, last + 1))


def _inline_count(inline: Mapping[int, int], part: timebuckets.Part) -> int:
    """The events of an hour part that its day item holds inline."""
    first, last = part.minutes if part.minutes is not None else (0, 59)
    start = part.bucket.first_minute % timebuckets.DAY_MINUTES
    return sum(inline.get(start + m, 0) for m in range(first, last + 1))


def _batch_get(
    dynamodb: DynamoDB, settings: Settings, keys: list[dict[str, Any]], sleep: Sleep | None
) -> dict[tuple[str, str], dict[str, Any]]:
    items = dynamo.batch_get_items(dynamodb, settings.counts_table, keys, "could not read the counts", sleep)
    return attributes.by_key(items)


def histogram(
    dynamodb: DynamoDB,
    settings: Settings,
    counter: str,
    first_minute: int,
    last_minute: int,
    resolution: timebuckets.Resolution,
    now_ms: int,
    where: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Counts and sums per bucket; with `where`, of the events having those dimension values."""
    window_params.check_histogram(timebuckets.bucket_count(first_minute, last_minute, resolution))
    dimension_keys.check_filter(where or {}, settings.filter_pairs)
    buckets = timebuckets.buckets_between(first_minute, last_minute, resolution)
    # Minutes live inside their hour items: a minute series is read from hour items.
    stored: timebuckets.Resolution = "hour" if resolution == "minute" else resolution
    size = timebuckets.RESOLUTION_MINUTES[stored]
    pk = dimension_keys.read_pk(counter, where or {})
    items = dict(_query_buckets(dynamodb, settings, pk, stored, buckets[0], buckets[-1]))
    # Minutes a day item holds inline belong to its hours (one more Query, of the days spanned).
    inline: dict[int, int] = {}
    retentions: list[dict[str, Any]] = []
    day_retention: dict[int, int] = {}
    if stored == "hour":
        for day, day_item in _query_buckets(dynamodb, settings, pk, "day", buckets[0], buckets[-1]):
            for minute, k in counter_keys.inline_minutes(day_item).items():
                inline[day * timebuckets.DAY_MINUTES + minute] = k
            retentions.append(day_item)
            day_retention[day] = attributes.integer(day_item, "retention", 0)
    assumed = _assumed_retention([*items.values(), *retentions], settings)
    now_s = now_ms // 1000

    # One object per stored item: the hour items of a minute series, else the buckets themselves.
    hours = (
        {i: timebuckets.Bucket(stored, i) for i in {b.first_minute // size for b in buckets}}
        if stored != resolution
        else {}
    )

    def stored_bucket(bucket: timebuckets.Bucket) -> timebuckets.Bucket:
        return hours[bucket.first_minute // size] if hours else bucket

    def inline_kept(hour: timebuckets.Bucket) -> bool:
        """An hour's inline minutes live by their day item's retention (its events' longest), as
        count_window judges them: the hour is kept while they are, whatever its own item says."""
        if stored != "hour" or not inline:
            return False
        held = sum(inline.get(m, 0) for m in range(hour.first_minute, hour.first_minute + size))
        retention = day_retention.get(timebuckets.day_of_hour(hour.index), 0)
        return held > 0 and timebuckets.expires_at_s(hour, retention) > now_s

    flags = [
        timebuckets.kept(stored_bucket(b), dynamo.stored_expiry(items.get(stored_bucket(b).index)), assumed, now_s)
        or inline_kept(stored_bucket(b))
        for b in buckets
    ]
    first = timebuckets.kept_from(flags)
    counts: dict[int, int] = {}
    sums: dict[int, dict[str, Decimal]] = {}
    for bucket in buckets[first:]:
        held = 0
        if inline_kept(stored_bucket(bucket)):
            minutes = (
                (bucket.first_minute,)
                if resolution == "minute"
                else range(bucket.first_minute, bucket.first_minute + size)
            )
            held = sum(inline.get(m, 0) for m in minutes)
        item = items.get(stored_bucket(bucket).index)
        expiry = dynamo.stored_expiry(item)
        if item is None or (expiry is not None and expiry <= now_s):
            # No item, or one past its own events' retention kept for its inline minutes'.
            if held:
                counts[bucket.index] = held
            continue
        if resolution == "minute":
            minute = bucket.first_minute % 60
            counts[bucket.index] = attributes.integer(item, counter_keys.minute_attribute(minute), 0) + held
            sums[bucket.index] = dimension_keys.sums_of(item, (minute, minute), "hour")
        else:
            counts[bucket.index] = attributes.integer(item, "n") + (held if resolution == "hour" else 0)
            sums[bucket.index] = dimension_keys.sums_of(item, None, resolution)
    retained_from = buckets[first].start_ms if first < len(buckets) else buckets[-1].end_ms
    return {
        "counter": counter,
        "resolution": resolution,
        **timebuckets.series(
            buckets, lambda b: {"count": counts.get(b.index, 0), **sums_fields(sums.get(b.index, {}))}
        ),
        **timebuckets.completeness(first == 0, retained_from),
        **({"where": dict(where)} if where else {}),
    }


def _query_buckets(
    dynamodb: DynamoDB,
    settings: Settings,
    pk: str,
    resolution: timebuckets.Resolution,
    first: timebuckets.Bucket,
    last: timebuckets.Bucket,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Stored buckets of one resolution covering first..last, expired ones included (paginated Query)."""
    size = timebuckets.RESOLUTION_MINUTES[resolution]
    lo, hi = first.first_minute // size, last.first_minute // size
    items = dynamo.query_sort_range(
        dynamodb,
        settings.counts_table,
        pk,
        counter_keys.bucket_sort_key(resolution, lo),
        counter_keys.bucket_sort_key(resolution, hi),
        "could not read the counts",
    )
    for item in items:
        yield keyspace.sort_key_index(attributes.sort_key(item)), item
