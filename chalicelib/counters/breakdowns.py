"""Breakdowns: a counter's count and sums per value of one dimension, over any window, ranked from
the summaries summary_writes.py writes and, when one evicted or with `where`, counted exactly from
the filter counters. How, what is exact, the bounds and the keys read: docs/counting.md,
"Breakdowns" and "Bounds"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.core import attributes, dynamo, timebuckets, times, window_params
from chalicelib.core.aws import DynamoDB
from chalicelib.core.errors import ValidationError
from chalicelib.core.settings import Settings
from chalicelib.counters import filters, layout, reads, topk
from chalicelib.events import dimensions as event_dimensions

DEFAULT_LIMIT = 10
MAX_LIMIT = 1000
MAX_CANDIDATES = 1000


Group = tuple[list[dict[str, Any]], tuple[int, int] | None]


def summary_keys(counter: str, by: str, first_minute: int, last_minute: int) -> list[Group]:
    """Per part of the window (timebuckets.plan), the keys of the summaries that cover it, each group
    with the minutes it needs (None: all): a partial hour's part 0, then its quarter hours. Pure."""
    groups: list[Group] = []
    quarter = layout.QUARTER_MINUTES
    for part in timebuckets.plan(first_minute, last_minute):
        bucket = part.bucket
        if part.minutes is None:
            groups.append((layout.summary_parts(counter, by, bucket.resolution, bucket.index), None))
            continue
        groups.append(([layout.summary_key(counter, by, "hour", bucket.index, 0)], part.minutes))
        first, last = (bucket.first_minute + m for m in part.minutes)
        for q in range(first // quarter, last // quarter + 1):
            start = q * quarter
            span = (max(first, start) - start, min(last, start + quarter - 1) - start)
            groups.append((layout.summary_parts(counter, by, "quarter", q), span))
    return groups


def stored_summary(item: dict[str, Any], span: tuple[int, int] | None) -> topk.Summary | None:
    """The summary of values a stored item gives for `span` (None: its whole bucket); None for a
    split hour's part 0 asked for a partial hour (its quarter hours give it)."""
    summary = topk.decode(attributes.text(item, "e"))
    hour = attributes.sort_key(item).startswith(layout.PREFIX["hour"])
    if attributes.optional_text(item, layout.LAYOUT) == layout.SINGLE:
        return topk.within(summary, *(span or (0, 59))) if hour else summary
    if span is None:
        return summary
    return None if hour else topk.within(summary, *span)


def breakdown(
    dynamodb: DynamoDB,
    settings: Settings,
    counter: str,
    by: str,
    first_minute: int,
    last_minute: int,
    limit: int,
    where: Mapping[str, str],
    now_ms: int,
    label: times.Label = times.utc_label,
) -> dict[str, Any]:
    """The answer of GET /counters/{counter}/breakdown (its JSON body); `label` writes its start
    and end (epoch minutes)."""
    window_params.check_minutes(first_minute, last_minute)
    if not isinstance(by, str) or not event_dimensions.NAME_PATTERN.fullmatch(by):
        raise ValidationError(
            f"by must be a dimension name: 1-{event_dimensions.NAME_MAX_CHARS} characters of A-Z a-z 0-9 _ . -"
        )
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValidationError(f"limit must be an integer from 1 to {MAX_LIMIT}")
    where = dict(where)
    if where:  # each value is counted from the filter counter of where plus by
        filters.check_filter({*where, by}, settings.filter_pairs)
    # Which part of the window is retained is what a count of it says; the summaries are read
    # for that part only (they live exactly as long as the counter's buckets).
    probe = reads.count_window(dynamodb, settings, counter, first_minute, last_minute, now_ms, where=where)
    from_minute = max(first_minute, probe.retained_from_ms // timebuckets.MINUTE_MS)
    groups = summary_keys(counter, by, from_minute, last_minute) if from_minute <= last_minute else []
    flat = [key for keys, _ in groups for key in keys]
    found = dynamo.batch_get_items(dynamodb, settings.counts_table, flat, "could not read the breakdown summaries")
    now_s = now_ms // 1000
    # The summaries read that have not expired, each cut to the minutes its group covers.
    live = {k: i for k, i in attributes.by_key(found).items() if "e" in i and dynamo.live(i, now_s)}
    cut = [[stored_summary(live[k], span) for k in map(attributes.key_of, keys) if k in live] for keys, span in groups]
    ranking = topk.rank([s for s in summaries if s is not None] for summaries in cut)
    keys_read = len(flat)
    exact = ranking.exact
    counted = [(r.value, r.count, r.sums) for r in ranking.values]
    distinct = len(ranking.values)
    if where or not exact:
        candidates = [r for r in ranking.values if by not in where or r.value == where[by]]
        if where and len(candidates) > MAX_CANDIDATES:
            exact = False
        if not where:
            candidates = candidates[:limit]
        counted = []
        for ranked in candidates[:MAX_CANDIDATES]:
            window = reads.count_window(
                dynamodb, settings, counter, from_minute, last_minute, now_ms, where={**where, by: ranked.value}
            )
            keys_read += window.keys_read
            if window.count:
                counted.append((ranked.value, window.count, window.sums))
        counted.sort(key=lambda v: (-v[1], v[0]))
        # Without `where`, every value the summaries list is one (those not read are not listed).
        distinct = len(counted) if where else max(len(counted), len(ranking.values))
    listed = [{"value": v, "count": n, **reads.sums_fields(s)} for v, n, s in counted[:limit]]
    total = reads.count_window(dynamodb, settings, counter, first_minute, last_minute, now_ms, where=where)
    keys_read += total.keys_read + probe.keys_read
    answer: dict[str, Any] = {
        "counter": counter,
        "by": by,
        "start": label(first_minute),
        "end": label(last_minute + 1),
        **timebuckets.completeness(total.complete, total.retained_from_ms),
        "keys_read": keys_read,
        "exact": exact,
        "values": listed,
        "others": {"values": max(0, distinct - len(listed)), "count": total.count - sum(v["count"] for v in listed)},
        **({"where": where} if where else {}),
    }
    if not exact:
        beyond = [r.count for r in ranking.values if r.value not in {v["value"] for v in listed}]
        answer["bound"] = max([ranking.missed_at_most, *beyond[:1]])
    return answer
