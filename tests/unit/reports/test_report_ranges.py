"""Quarter-hour partitions and sort-key bounds of a report range, against a brute force."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chalicelib.core.errors import ValidationError
from chalicelib.core.times import QUARTER_HOUR_MS
from chalicelib.events import ingest as events
from chalicelib.reports import ranges as report_ranges
from chalicelib.reports.ranges import PartitionQuery

T0 = 1_795_000_000_000
times = st.integers(T0 - 3 * 86_400_000, T0 + 3 * 86_400_000)
suffixes = st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", min_size=12, max_size=12)


def planned(start_ms: int, end_ms: int, shards: int) -> list[PartitionQuery]:
    """Every Query of the range, quarter hour by quarter hour, as a run reads them."""
    return [query for _, queries in report_ranges.quarter_queries(start_ms, end_ms, shards) for query in queries]


def selects(query: PartitionQuery, pk: str, sk: str) -> bool:
    """How DynamoDB evaluates the Query's key condition: its partition, then string comparison on the sort key."""
    expression, values = query.sort_condition()
    if pk != query.pk:
        return False
    if "BETWEEN" in expression:
        return values[":low"] <= sk <= values[":high"]
    if ">=" in expression:
        return sk >= values[":low"]
    if "<" in expression:
        return sk < values[":high"]
    return True


@settings(max_examples=300)
@given(start=times, span=st.integers(0, 2 * 86_400_000), ingest=times, shard=st.integers(0, 7), suffix=suffixes)
def test_given_any_event_and_range_when_planned_then_selected_by_exactly_one_query_iff_in_range(
    start: int, span: int, ingest: int, shard: int, suffix: str
) -> None:
    end = start + span
    pk, sk = events.partition_key(ingest, shard), events.sort_key(ingest, suffix)
    queries = planned(start, end, shards=8)
    hits = sum(selects(q, pk, sk) for q in queries)
    assert hits == (1 if start <= ingest < end else 0)


@given(start=times, span=st.integers(1, 2 * 86_400_000), shards=st.integers(1, 6))
def test_given_range_when_planned_then_exactly_the_overlapping_quarter_hours_times_shards(
    start: int, span: int, shards: int
) -> None:
    end = start + span
    queries = planned(start, end, shards)
    overlapping = {q for q in range(start // QUARTER_HOUR_MS, (end - 1) // QUARTER_HOUR_MS + 1)}
    assert len(queries) == len(overlapping) * shards
    assert len({q.pk for q in queries}) == len(queries)
    # Only the first and last quarter hour may carry a sort-key condition.
    inner = queries[shards:-shards]
    assert all(q.low is None and q.high is None for q in inner)


def test_given_range_on_quarter_hour_boundaries_when_planned_then_no_sort_key_conditions() -> None:
    start = T0 - T0 % QUARTER_HOUR_MS
    queries = planned(start, start + 4 * QUARTER_HOUR_MS, shards=2)
    assert len(queries) == 8
    assert all(q.sort_condition()[0] == "" for q in queries)


def test_given_range_inside_one_quarter_hour_when_planned_then_between_on_each_shard() -> None:
    start = T0 - T0 % QUARTER_HOUR_MS + 60_000
    queries = planned(start, start + 120_000, shards=3)
    assert [q.sort_condition()[0] for q in queries] == ["sk BETWEEN :low AND :high"] * 3


def test_given_empty_or_backwards_range_when_planned_then_no_queries() -> None:
    assert planned(T0, T0, 4) == []
    assert planned(T0, T0 - 1, 4) == []


@given(start=times, span=st.integers(1, 10 * 86_400_000))
def test_given_range_when_id_made_then_parses_back_and_sorts_by_start(start: int, span: int) -> None:
    made = report_ranges.report_id(start, start + span)
    assert report_ranges.parse_report_id(made) == (start, start + span)
    later = report_ranges.report_id(start + 1, start + 1 + span)
    assert made < later


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "latest",
        "20261121T230000000Z",
        "20261121T230000000Z-20261121T230000000Z",
        "20261121T240000000Z-20261122T000000000Z",
        "20261322T000000000Z-20261323T000000000Z",
        "20261122T000000000Z-20261121T000000000Z",
        "../20261121T230000000Z-20261122T000000000Z",
        5,
    ],
)
def test_given_malformed_report_id_when_parsed_then_validation_error(bad: object) -> None:
    with pytest.raises(ValidationError):
        report_ranges.parse_report_id(bad)


@given(cutoff=times, interval=st.integers(15, 1440))
def test_given_no_checkpoint_when_first_start_then_quarter_hour_at_least_one_interval_back(
    cutoff: int, interval: int
) -> None:
    start = report_ranges.first_start(cutoff, interval)
    assert start % QUARTER_HOUR_MS == 0
    assert cutoff - interval * 60_000 - QUARTER_HOUR_MS < start <= cutoff - interval * 60_000


def test_given_known_time_when_id_made_then_readable_utc() -> None:
    start = int(datetime(2026, 11, 21, 23, 0, tzinfo=UTC).timestamp() * 1000)
    assert report_ranges.report_id(start, start + 3_600_123) == "20261121T230000000Z-20261122T000000123Z"
