"""Breakdown summaries (counters/topk.py): bounded in bytes, exact until they evict, and their
bounds hold after, against brute force."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from chalicelib.counters import topk

STREAMS = st.lists(st.lists(st.integers(0, 300), max_size=60), min_size=1, max_size=6)


def summarize(values: list[int], max_bytes: int) -> topk.Summary:
    summary = topk.Summary()
    for chunk in range(0, len(values), 7):  # batches, each merged then fitted, as the stream does
        for v in values[chunk : chunk + 7]:
            summary.add(f"value-{v}", 1, {"amount": Decimal(v) / 10})
        summary.fit(max_bytes)
        summary = topk.decode(topk.encode(summary))
    return summary


@given(STREAMS)
def test_given_room_for_every_value_when_merged_over_buckets_then_ranking_counts_and_sums_exact(
    buckets: list[list[int]],
) -> None:
    summaries = [summarize(b, 1_000_000) for b in buckets]
    ranking = topk.rank([s] for s in summaries)
    truth = Counter(v for b in buckets for v in b)
    assert ranking.exact and ranking.missed_at_most == 0
    assert [(r.value, r.count) for r in ranking.values] == sorted(
        ((f"value-{v}", n) for v, n in truth.items()), key=lambda kv: (-kv[1], kv[0])
    )
    for r in ranking.values:
        v = int(r.value.split("-")[1])
        assert r.sums == ({"amount": Decimal(v) / 10 * truth[v]} if v else {"amount": Decimal(0)})


@given(STREAMS, st.integers(60, 600))
def test_given_small_capacity_when_values_evicted_then_size_bounded_and_bounds_hold(
    buckets: list[list[int]], max_bytes: int
) -> None:
    summaries = [summarize(b, max_bytes) for b in buckets]
    for s in summaries:
        assert len(topk.encode(s).encode("utf-8")) <= max_bytes or not s.entries
    ranking = topk.rank([s] for s in summaries)
    truth = Counter(f"value-{v}" for b in buckets for v in b)
    listed = {r.value: r for r in ranking.values}
    for value, n in truth.items():
        if value in listed:
            assert listed[value].low <= n <= listed[value].count
        else:
            assert n <= ranking.missed_at_most
    assert ranking.exact == all(s.floor == 0 for s in summaries)
    if ranking.exact:
        assert {r.value: r.count for r in ranking.values} == dict(truth)


def test_given_a_heavy_value_among_many_when_capacity_is_small_then_it_stays_listed() -> None:
    values = [i for i in range(2000)] + [7] * 500
    summary = summarize(values, 2_000)
    assert summary.floor > 0
    ranking = topk.rank([[summary]])
    assert ranking.values[0].value == "value-7" and ranking.values[0].low >= 400


@given(
    st.lists(st.tuples(st.integers(0, 14), st.integers(0, 40)), max_size=120),
    st.integers(0, 14),
    st.integers(0, 14),
    st.sampled_from([150, 400, 1_000_000]),
)
def test_given_a_quarter_summary_when_cut_to_some_minutes_then_counts_within_its_bounds(
    events: list[tuple[int, int]], a: int, b: int, max_bytes: int
) -> None:
    first, last = min(a, b), max(a, b)
    summary = topk.Summary()
    for start in range(0, len(events), 9):
        for minute, v in events[start : start + 9]:
            summary.add(f"{minute:02d}v{v}", 1, {})
        summary.fit(max_bytes)
    cut = topk.within(summary, first, last)
    truth = Counter(f"v{v}" for minute, v in events if first <= minute <= last)
    for value, n in truth.items():
        if value in cut.entries:
            entry = cut.entries[value]
            assert entry.count - entry.err <= n <= entry.count
        else:
            assert n <= cut.floor
    if summary.floor == 0:
        assert {v: e.count for v, e in cut.entries.items()} == dict(truth)


@given(st.lists(st.integers(0, 300), max_size=60), st.lists(st.integers(0, 300), max_size=60), st.integers(150, 600))
def test_given_two_summaries_of_one_bucket_when_merged_then_bounds_hold_for_every_value(
    a: list[int], b: list[int], max_bytes: int
) -> None:
    merged = topk.merge(summarize(a, max_bytes), summarize(b, max_bytes))
    truth = Counter(f"value-{v}" for v in a + b)
    for value, entry in merged.entries.items():
        assert entry.count - entry.err <= truth[value] <= entry.count
    assert all(n <= merged.floor for v, n in truth.items() if v not in merged.entries)
    if merged.floor == 0:
        assert {v: e.count for v, e in merged.entries.items()} == dict(truth)
