"""Counts-table keys: buckets sort in time order, ledgers identify each stored event once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core.timebuckets import Bucket
from chalicelib.counters import keys as counter_keys
from chalicelib.events import ingest as events

ingest_times = st.integers(min_value=1_700_000_000_000, max_value=1_900_000_000_000)
suffixes = st.text(alphabet="abcXYZ019_-", min_size=12, max_size=12)


@given(st.lists(st.tuples(ingest_times, suffixes), min_size=2, max_size=30, unique=True), st.sampled_from([1, 10, 60]))
def test_given_distinct_stored_events_when_ledgered_then_distinct_entries_and_keys_by_slice(
    stored: list[tuple[int, str]], slice_seconds: int
) -> None:
    seen = set()
    for ingest_ms, suffix in stored:
        pk, sk = events.partition_key(ingest_ms, 1), events.sort_key(ingest_ms, suffix)
        found = counter_keys.ledger_key_and_entry(pk, sk, slice_seconds)
        assert found is not None
        key, entry = found
        seen.add((key["pk"]["S"], entry))
        # Same slice of the same partition: same ledger item.
        slice_start = ingest_ms // (slice_seconds * 1000) * slice_seconds * 1000
        other = counter_keys.ledger_key_and_entry(pk, events.sort_key(slice_start, "z" * 12), slice_seconds)
        assert other is not None and other[0] == key
    assert len(seen) == len(stored)


def test_given_foreign_sort_keys_when_ledgered_then_none() -> None:
    for sk in ["", "2026-11-21T10:00:00Z", "hand-written", "2026-11-21T10:00:00.123Z#bad key"]:
        assert counter_keys.ledger_key_and_entry("202611211000#0", sk, 10) is None
    assert counter_keys.ledger_key_and_entry("202611211000#0", "2026-11-21T10:00:00.123Z#abc", 7) is None


@given(st.integers(0, 10**9), st.integers(0, 10**9))
def test_given_buckets_when_keyed_then_sort_keys_order_like_indexes(a: int, b: int) -> None:
    ka = counter_keys.bucket_key("c", Bucket("hour", a))["sk"]["S"]
    kb = counter_keys.bucket_key("c", Bucket("hour", b))["sk"]["S"]
    assert (ka < kb) == (a < b)
