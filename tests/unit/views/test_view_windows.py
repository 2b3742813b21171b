"""View buckets (pure): where a view is counted, the plan of a range, packing transactions."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chalicelib.core import timebuckets
from chalicelib.core.settings import Settings
from chalicelib.core.timebuckets import Bucket
from chalicelib.views import api as views_api
from chalicelib.views import layout as view_keys
from chalicelib.views import windows
from chalicelib.views.windows import Part

T0_MINUTE = 1_795_000_000_000 // windows.MINUTE_MS
MAX_MINUTES = windows.MAX_RANGE_DAYS * 1440
SETTINGS = Settings()
minutes = st.integers(T0_MINUTE - 3 * 366 * 1440, T0_MINUTE + 3 * 366 * 1440)


def covered(part: Part) -> tuple[int, int]:
    """The minutes [start, stop) a part counts."""
    if part.inner is None:
        return part.span.first_minute, part.span.stop_minute
    size = windows.INNER[part.span.resolution][1]
    return part.span.first_minute + part.inner[0] * size, part.span.first_minute + (part.inner[1] + 1) * size


def stored(times_ms: list[int]) -> dict[Bucket, dict[str, Any]]:
    """Bucket items as the queue handler leaves them, in DynamoDB's attribute format."""
    items: dict[Bucket, dict[str, Any]] = {}
    for span, increment in windows.increments(times_ms).items():
        item: dict[str, Any] = {"n": {"N": str(increment.n)}}
        for position, k in increment.inner.items():
            item[windows.inner_attribute(span.resolution, position)] = {"N": str(k)}
        items[span] = item
    return items


# -- the plan of a range ------------------------------------------------------------------------


@given(minutes, st.one_of(st.integers(1, MAX_MINUTES), st.sampled_from([1, 60, 1440, 7 * 1440, MAX_MINUTES])))
def test_given_any_range_up_to_400_days_when_planned_then_parts_cover_it_exactly_in_order_and_are_few(
    first: int, length: int
) -> None:
    last = first + length - 1
    parts = windows.plan(first, last)
    spans = [covered(p) for p in parts]
    assert spans[0][0] == first and spans[-1][1] == last + 1
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])), "contiguous, in time order, no overlap"
    assert all(p.start_minute == s[0] for p, s in zip(parts, spans))
    assert len({p.span for p in parts}) == len(parts), "no item read twice"
    assert len(parts) <= windows.MAX_PARTS
    if length <= 1440:
        assert len(parts) <= 4


@given(minutes)
def test_given_a_minute_when_placed_then_each_bucket_and_inner_bucket_holds_it(minute: int) -> None:
    placed = windows.spans_of(minute)
    assert [span.resolution for span, _ in placed] == list(windows.LEVELS)
    for span, position in placed:
        assert span.first_minute <= minute < span.stop_minute
        size = windows.INNER[span.resolution][1]
        assert span.first_minute + position * size <= minute < span.first_minute + (position + 1) * size
        assert windows.inner_attribute(span.resolution, position)[1:] == f"{position:02d}"


@settings(max_examples=200)
@given(
    st.lists(st.integers(0, 70 * 1440 * 60_000), max_size=60),
    st.integers(-2 * 1440, 72 * 1440),
    st.integers(1, 80 * 1440),
)
def test_given_views_at_any_times_when_a_range_is_read_from_buckets_then_equal_to_counting_them(
    offsets: list[int], start_offset: int, length: int
) -> None:
    base_ms = (T0_MINUTE - T0_MINUTE % (32 * 1440)) * windows.MINUTE_MS - 7 * 86_400_000  # straddles blocks
    times = [base_ms + t for t in offsets]
    items = stored(times)
    first = base_ms // windows.MINUTE_MS + start_offset
    last = first + length - 1
    total = sum(
        views_api._part_count(part, items[part.span]) for part in windows.plan(first, last) if part.span in items
    )
    assert total == sum(1 for t in times if first <= t // windows.MINUTE_MS <= last)


# -- retention -------------------------------------------------------------------------------------


def test_given_a_bucket_when_its_retention_passes_then_no_longer_kept_and_only_kept_suffix_counts() -> None:
    span = Bucket("hour", T0_MINUTE // 60)
    expiry = timebuckets.expires_at_s(span, 3600)
    assert timebuckets.kept(span, None, 3600, expiry - 1) and not timebuckets.kept(span, None, 3600, expiry)
    assert timebuckets.kept(span, expiry + 10, 3600, expiry), "a stored expiry wins"
    assert timebuckets.live(span, 3600, (expiry - 1) * 1000) and not timebuckets.live(span, 3600, expiry * 1000)
    assert timebuckets.kept_from([False, True, False, True, True]) == 3
    assert timebuckets.kept_from([True, True]) == 0 and timebuckets.kept_from([True, False]) == 2


# -- keys ------------------------------------------------------------------------------------------


@given(st.text(min_size=1, max_size=2048), st.sampled_from(windows.LEVELS), st.integers(0, 10**7), st.integers(1, 99))
def test_given_a_url_and_buckets_when_keyed_then_own_partition_and_keys_sort_by_time_within_a_level(
    url: str, level: windows.Level, index: int, later: int
) -> None:
    key = view_keys.bucket_key(url, Bucket(level, index))
    digest = view_keys.url_pk(url).removeprefix("URL#")
    assert key["pk"]["S"] == "VWB#" + digest and len(key["pk"]["S"].encode()) <= 2048
    assert view_keys.bucket_pk(view_keys.url_pk(url)) == key["pk"]["S"]
    assert key["sk"]["S"] < view_keys.bucket_sk(Bucket(level, index + later))
    others = {view_keys.bucket_sk(Bucket(other, index)) for other in windows.LEVELS if other != level}
    assert key["sk"]["S"] not in others


@given(st.integers(0, 60_000_000))
def test_given_any_minute_when_its_hour_and_day_are_placed_one_level_up_then_as_spans_of_places_them(
    minute: int,
) -> None:
    from chalicelib.views import rollup

    placed = dict(windows.spans_of(minute))
    hour, day, block = (next(s for s in placed if s.resolution == level) for level in windows.LEVELS)
    assert rollup.parent(hour) == (day, placed[day])
    assert rollup.parent(day) == (block, placed[block])


def test_given_bucket_items_of_any_level_when_totalled_then_their_n() -> None:
    from chalicelib.views import rollup

    day = {"pk": {"S": "VWB#x"}, "sk": {"S": "d#1"}, "h03": {"N": "4"}, "h17": {"N": "2"}, "n": {"N": "6"}}
    assert rollup.total(day) == 6
    assert rollup.total({"d00": {"N": "5"}, "d31": {"N": "1"}, "n": {"N": "6"}}) == 6
    assert rollup.total({"n": {"N": "7"}, "m05": {"N": "7"}}) == 7
    assert rollup.total(None) == 0


# -- moving pending minutes into buckets ------------------------------------------------------------


def apply_update(item: dict[str, int], update: dict[str, Any]) -> None:
    """What one of a move's UpdateItem expressions does to an item (numbers only)."""
    names, values = update["ExpressionAttributeNames"], update.get("ExpressionAttributeValues", {})
    expression = update["UpdateExpression"]
    for clause in ("ADD ", "SET ", "REMOVE "):
        if clause not in expression:
            continue
        body = expression.split(clause, 1)[1]
        for other in ("ADD ", "SET ", "REMOVE "):
            body = body.split(" " + other, 1)[0]
        for action in body.split(", "):
            if clause == "REMOVE ":
                item.pop(names.get(action, action), None)
            elif clause == "ADD ":
                name, value = action.split()
                item[names.get(name, name)] = item.get(names.get(name, name), 0) + int(values[value]["N"])
            else:
                name, value = action.split(" = ")
                item[names.get(name, name)] = int(values[value]["N"])


@settings(max_examples=100)
@given(
    st.dictionaries(st.integers(0, 30 * 1440), st.integers(1, 50), min_size=1, max_size=120),
    st.integers(0, 3),
)
def test_given_pending_minutes_when_moved_then_buckets_gain_exactly_what_the_counter_loses(
    offsets: dict[int, int], moved_before: int
) -> None:
    from chalicelib.views import rollup

    now = 1_795_000_000_000
    short = replace(SETTINGS, view_bucket_retention_seconds=20 * 86_400)  # the oldest minutes expired
    now_minute = now // windows.MINUTE_MS
    pending = {now_minute - offset: n for offset, n in offsets.items()}
    counter: dict[str, Any] = {view_keys.pending_attribute(m): {"N": str(n)} for m, n in pending.items()}
    counter["views"] = {"N": str(sum(pending.values()))}
    if moved_before:
        counter[view_keys.FLUSHES] = {"N": str(moved_before)}
    pk = "URL#" + "0" * 64
    items = rollup.move_items(short, pk, counter, now)
    assert len(items) <= rollup.MOVE_ITEMS
    update = items[0]["Update"]
    assert update["Key"] == view_keys.counter_key_of(pk)
    assert "#v = :v" in update["ConditionExpression"], "no move over a counter counted into since read"
    removed_names = {
        update["ExpressionAttributeNames"][n] for n in update["UpdateExpression"].split("REMOVE ")[1].split(", ")
    }
    removed = sorted(m for m in pending if view_keys.pending_attribute(m) in removed_names)
    assert removed == sorted(pending)[: len(removed)] and 0 < len(removed) <= rollup.MOVE_MINUTES, "the earliest"
    state: dict[tuple[str, str], dict[str, int]] = {}
    for item in items:
        key = (item["Update"]["Key"]["pk"]["S"], item["Update"]["Key"]["sk"]["S"])
        apply_update(state.setdefault(key, {}), item["Update"])
    assert state.pop((pk, view_keys.COUNTER_SK)) == {view_keys.FLUSHES: moved_before + 1}
    moved = [m for m in removed if rollup.live_minute(short, m, now)]  # expired ones are dropped
    expected = windows.increments([m * windows.MINUTE_MS for m in moved for _ in range(pending[m])])
    for span, increment in expected.items():
        bucket = state.pop((view_keys.bucket_pk(pk), view_keys.bucket_sk(span)))
        assert bucket.pop("n") == increment.n and bucket.pop(view_keys.FLUSHED) == moved_before + 1
        bucket.pop("expires_at")
        assert bucket == {windows.inner_attribute(span.resolution, p): k for p, k in increment.inner.items()}
    assert not state, "no other item written"
