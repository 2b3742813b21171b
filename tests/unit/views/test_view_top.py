"""Top URLs (pure): the heavy-hitters summary under snapshots in any order, the window's cover,
and the selection, each against brute force."""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from chalicelib.core.timebuckets import RESOLUTION_MINUTES, Bucket
from chalicelib.views import top

T0_HOUR = 1_795_000_000_000 // 3_600_000
MAX_HOURS = 400 * 24


def digest(name: str) -> bytes:
    return top.digest_of_sha(hashlib.sha256(name.encode()).hexdigest())


def hours_of(span: Bucket) -> range:
    return range(span.first_minute // 60, span.stop_minute // 60)


# -- the cover of a window --------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.integers(T0_HOUR - 5000, T0_HOUR + 5000), st.integers(1, MAX_HOURS))
def test_given_any_window_up_to_400_days_when_covered_then_each_hour_once_in_time_order_within_the_bound(
    first: int, length: int
) -> None:
    spans = top.cover(first, first + length - 1)
    hours = [h for span in spans for h in hours_of(span)]
    assert hours == list(range(first, first + length))
    assert len(spans) <= top.MAX_SPANS
    assert len({top.block_of(span) for span in spans}) <= top.MAX_BLOCKS
    assert all(top.block_of(span).first_minute <= span.first_minute < top.block_of(span).stop_minute for span in spans)


def test_given_the_worst_windows_when_covered_then_exactly_max_spans_items() -> None:
    block = RESOLUTION_MINUTES["block"] // 60
    start = (T0_HOUR // block) * block + 1  # 23 hours and 31 days before the first whole block
    assert len(top.cover(start, start + 46 + 62 * 24 + 10 * block - 1)) == top.MAX_SPANS
    worst = max(len(top.cover(start + o, start + o + n - 1)) for o in (0, 1, 25) for n in range(9100, MAX_HOURS + 1))
    assert worst == top.MAX_SPANS
    blocks = max(
        len({top.block_of(s) for s in top.cover(start + o, start + o + MAX_HOURS - 1)}) for o in range(0, block, 5)
    )
    assert blocks == top.MAX_BLOCKS


def test_given_whole_blocks_and_days_when_covered_then_the_coarsest_items() -> None:
    block = RESOLUTION_MINUTES["block"] // 60
    start = (T0_HOUR // block) * block
    assert top.cover(start, start + block - 1) == [Bucket("block", start // block)]
    assert [s.resolution for s in top.cover(start + 24, start + 24 + 47)] == ["day", "day"]
    assert [s.resolution for s in top.cover(start + 23, start + 49)] == ["hour", "day", "hour", "hour"]


# -- the summary ------------------------------------------------------------------------------


def test_given_a_full_summary_when_encoded_then_it_fits_the_item_cap_and_decodes_the_same() -> None:
    summary = top.Summary()
    for i in range(top.CAPACITY + 50):
        summary.observe(digest(f"u{i}"), i + 1)
    packed = summary.encode()
    assert len(packed) == top.CAPACITY * top.ENTRY_BYTES <= 13_000
    assert top.Summary.decode(packed, summary.floor) == summary
    assert summary.floor == 50  # the 50 smallest were dropped for larger ones


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 40), min_size=1, max_size=30),  # each URL's final count
    st.integers(1, 12),  # capacity
    st.randoms(use_true_random=False),
)
def test_given_snapshots_in_any_order_repeated_and_stale_when_observed_then_held_is_a_lower_and_max_held_floor_an_upper_bound(
    finals: list[int], capacity: int, rng: random.Random
) -> None:
    # Each URL's count grows 1 by 1; any snapshot may be observed, any number of times, in any
    # order, as long as the final one is observed at least once (what the handlers guarantee).
    snapshots = [(i, rng.randint(1, final)) for i, final in enumerate(finals) for _ in range(rng.randint(0, 3))]
    snapshots += [(i, final) for i, final in enumerate(finals)] * rng.randint(1, 2)
    rng.shuffle(snapshots)
    summary = top.Summary(capacity=capacity)
    for i, count in snapshots:
        summary.observe(digest(f"u{i}"), count)
    assert len(summary.entries) <= capacity
    for i, final in enumerate(finals):
        held = summary.entries.get(digest(f"u{i}"), 0)
        assert held <= final <= max(held, summary.floor)
    if len(finals) <= capacity:
        assert summary.floor == 0
        assert summary.entries == {digest(f"u{i}"): final for i, final in enumerate(finals)}


def test_given_a_snapshot_seen_again_when_observed_then_nothing_changes() -> None:
    summary = top.Summary(capacity=2)
    assert summary.observe(digest("a"), 3) and summary.observe(digest("b"), 5)
    assert not summary.observe(digest("a"), 3) and not summary.observe(digest("a"), 2)
    assert summary.observe(digest("c"), 1)  # refused, but raises the floor
    assert not summary.observe(digest("c"), 1)
    assert summary.floor == 1 and digest("c") not in summary.entries


# -- the selection against brute force ----------------------------------------------------------


def brute_top(totals: dict[str, int], prefix: str | None) -> list[tuple[str, int]]:
    rows = [(u, v) for u, v in totals.items() if v > 0 and (prefix is None or u.startswith(prefix))]
    return sorted(rows, key=lambda uv: (-uv[1], uv[0]))


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 60),  # URLs
    st.integers(1, 6),  # buckets in the window
    st.integers(2, 40),  # capacity
    st.integers(1, 12),  # limit
    st.sampled_from([None, "a/", "b/1"]),
    st.randoms(use_true_random=False),
)
def test_given_random_buckets_when_top_selected_then_counts_exact_and_exact_true_only_when_the_ranking_is(
    urls: int, buckets: int, capacity: int, limit: int, prefix: str | None, rng: random.Random
) -> None:
    names = [f"{rng.choice('ab')}/{i}" for i in range(urls)]
    skew = [min(rng.paretovariate(1.2), 50.0) for _ in names]
    per_bucket = []
    for _ in range(buckets):
        counts = Counter({n: int(rng.random() < 0.7) * int(s * rng.randint(0, 5)) for n, s in zip(names, skew)})
        per_bucket.append(+counts)
    totals = Counter[str]()
    for counts in per_bucket:
        totals.update(counts)
    summaries = []
    for counts in per_bucket:
        summary = top.Summary(capacity=capacity)
        for name, count in rng.sample(sorted(counts.items()), len(counts)):
            for snapshot in sorted({rng.randint(1, count), count}):
                summary.observe(digest(name), snapshot)
        summaries.append(summary)
    by_digest = {digest(n): n for n in names}
    resolved: list[bytes] = []

    def resolve(digests: Sequence[bytes]) -> dict[bytes, list[tuple[str, int]]]:
        resolved.extend(digests)
        return {
            d: [(by_digest[d], totals[by_digest[d]])] if prefix is None or by_digest[d].startswith(prefix) else []
            for d in digests
        }

    merged = top.merge(summaries)
    selection = top.select(merged, limit, resolve, limit + 5, filtered=prefix is not None)
    truth = brute_top(totals, prefix)
    listed = dict(selection.urls)
    assert all(totals[u] == v for u, v in selection.urls), "listed counts are exact"
    assert len(selection.urls) <= limit and len(resolved) == len(set(resolved)) <= limit + 5
    for url, views in truth:
        if url not in listed:
            assert views <= selection.bound, "the bound holds for every URL left out"
    if selection.exact:
        assert [v for _, v in selection.urls] == [v for _, v in truth[:limit]]
    if all(len(c) <= capacity for c in per_bucket) and len(merged.candidates) <= limit + 5:
        assert selection.exact, "every bucket held every URL: the ranking is exact"
    if selection.others_complete:
        beyond = [v for u, v in truth if u not in listed]
        assert selection.others == (len(beyond), sum(beyond))


# -- what a batch must log -------------------------------------------------------------------


def test_given_random_summaries_when_a_batch_logs_only_what_is_uncovered_then_every_reader_order_covers_it() -> None:
    """Whatever order a reader observes the logs in (with logs of other batches among them),
    every snapshot of the batch ends at most max(held, floor): the ones it logged because they
    are observed, the others because the base or a log it trusted covers them."""
    from chalicelib.views import top_store

    rng = random.Random(5)
    digest = [bytes([i]) * 8 for i in range(12)]
    for _ in range(400):
        base = top.Summary(capacity=4)
        for _ in range(rng.randrange(8)):
            base.observe(rng.choice(digest), rng.randrange(1, 9))
        trusted = {d: rng.randrange(1, 9) for d in rng.sample(digest, rng.randrange(4))}
        batch = {d: rng.randrange(1, 12) for d in rng.sample(digest, rng.randrange(1, 6))}
        news = top_store._uncovered(base, trusted, batch)
        others = [{d: rng.randrange(1, 12) for d in rng.sample(digest, 3)} for _ in range(rng.randrange(3))]
        logs = [trusted, news, *others]
        for _ in range(4):
            rng.shuffle(logs)
            reader = top.Summary(dict(base.entries), base.floor, capacity=4)
            for log in logs:
                for d, c in sorted(log.items()):
                    reader.observe(d, c)
            assert all(max(reader.entries.get(d, 0), reader.floor) >= c for d, c in batch.items())
