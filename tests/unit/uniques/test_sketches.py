"""Sketch encoding, folding, merging, the exact state and accuracy (pure, no I/O)."""

from __future__ import annotations

import pickle
import zlib
from hashlib import sha1

import numpy as np
import pytest
from hyperloglog import HyperLogLog
from hypothesis import given, settings
from hypothesis import strategies as st
from msgpack import packb

from chalicelib.uniques import sketches
from chalicelib.uniques.sketches import EXACT_LIMIT, SketchFormatError

P = sketches.precision_for(0.01)
KEY = b"unit-item-key-" + bytes(range(32))


def keys(start: int, stop: int) -> bytes:
    return sketches.item_hashes(KEY, (f"visitor-{i}" for i in range(start, stop)))


def library(p: int, items: list[str]) -> HyperLogLog:
    """The library's sketch of the items as they enter ours: keyed."""
    sketch = HyperLogLog.__new__(HyperLogLog)
    sketch.__init__(sketches.standard_error(p))  # type: ignore[misc]
    assert sketch.p == p
    sketch.add_bulk([sketches.keyed_item(KEY, item) for item in items])
    return sketch


def test_given_error_rate_when_precision_computed_then_it_matches_the_library() -> None:
    for rate in (0.26, 0.05, 0.01, 0.005):
        assert sketches.precision_for(rate) == HyperLogLog(rate).p
    with pytest.raises(ValueError):
        sketches.precision_for(0.001)


@pytest.mark.parametrize("n", [0, 1, 10, 300, 301, 5000, 200_000])
def test_given_sketch_when_encoded_and_decoded_then_registers_and_estimate_survive(n: int) -> None:
    sketch = sketches.from_hashes(P, keys(0, n))
    data = sketches.encode(sketch)
    back = sketches.decode(data)
    assert back == sketch and back.p == sketch.p
    assert sketches.estimate(back) == sketches.estimate(sketch)
    assert data[3] == (sketches.EXACT if n <= EXACT_LIMIT else data[3])


@pytest.mark.parametrize("n", [0, 1, 10, 200, EXACT_LIMIT])
def test_given_at_most_the_limit_when_counted_then_exact_and_stored_as_hashes(n: int) -> None:
    sketch = sketches.from_hashes(P, keys(0, n) + keys(0, n // 2))
    assert sketches.is_exact(sketch) and sketches.estimate(sketch) == n
    assert sketches.interval(sketch) == (n, n)
    data = sketches.encode(sketch)
    assert data[2:4] == bytes([sketches.FORMAT_VERSION, sketches.EXACT])
    assert len(data) == sketches.HEADER.size + 8 * n


def test_given_exact_sketch_when_one_more_item_arrives_then_registers_and_estimate_never_fall() -> None:
    for seed in range(20):
        items = [f"s{seed}-{i}" for i in range(EXACT_LIMIT + 40)]
        sketch = sketches.empty(P)
        previous = 0
        for i, item in enumerate(items):
            sketches.add_values(sketch, sketches.hash_values(sketches.item_hash(KEY, item)))
            now = sketches.estimate(sketch)
            assert now >= previous
            assert sketches.is_exact(sketch) == (i < EXACT_LIMIT)
            previous = now
        # nothing was lost at the switch: the registers are those of every item
        assert np.array_equal(sketch.M, library(P, items).M)


def test_given_empty_and_small_register_sketches_when_encoded_then_sparse_and_under_1kb() -> None:
    for n in (0, 10, 99):
        sketch = sketches.fold(sketches.from_hashes(P, keys(0, n)), P)
        sketch.exact, sketch.floor = None, EXACT_LIMIT + 1
        data = sketches.encode(sketch)
        assert data[3] == sketches.SPARSE
        assert len(data) < 1024


def test_given_full_sketch_when_encoded_then_dense_and_under_12kb() -> None:
    sketch = sketches.from_hashes(P, keys(0, 300_000))
    assert np.count_nonzero(sketch.M) == sketch.m
    data = sketches.encode(sketch)
    assert data[3] == sketches.DENSE
    assert len(data) <= 12 * 1024


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.integers(0, (1 << 10) - 1), st.integers(1, 64 - 10 + 1), max_size=1 << 10))
def test_given_any_registers_when_round_tripped_then_identical(registers: dict[int, int]) -> None:
    m = np.zeros(1 << 10, np.uint8)
    for index, value in registers.items():
        m[index] = value
    sketch = sketches.Sketch(10, m, None, EXACT_LIMIT + 1)
    assert sketches.decode(sketches.encode(sketch)) == sketch


def corrupt_variants() -> list[bytes]:
    small = sketches.fold(sketches.from_hashes(P, keys(0, 50)), P)
    small.exact, small.floor = None, EXACT_LIMIT + 1
    good = sketches.encode(small)
    dense = sketches.encode(sketches.from_hashes(P, keys(0, 20_000)))
    exact = sketches.encode(sketches.from_hashes(P, keys(0, 5)))
    header = sketches.HEADER
    v = sketches.FORMAT_VERSION
    overflow = np.zeros(1 << P, np.uint8)
    overflow[3] = 64
    return [
        b"",
        b"TH\x01",
        b"XX" + good[2:],  # magic
        good[:2] + b"\x03" + good[3:],  # format version
        good[:3] + b"\x07" + good[4:],  # kind
        good[:4] + b"\x03" + good[5:],  # precision below range
        good[:4] + b"\x11" + good[5:],  # precision above range
        good[:-3],  # truncated
        good + b"junk",  # trailing bytes
        good[:5] + bytes(b ^ 0xFF for b in good[5:]),  # flipped payload
        dense[:4] + bytes([P - 1]) + dense[5:],  # too many registers for the precision
        header.pack(b"TH", v, sketches.DENSE, P) + zlib.compress(overflow.tobytes()),  # rho too large
        header.pack(b"TH", v, sketches.SPARSE, P) + zlib.compress(b"\x00\x05\x00\x00\x01\x01"),  # repeat index
        header.pack(b"TH", v, sketches.SPARSE, P) + zlib.compress(b"\xff\xff\x01"),  # index beyond m
        header.pack(b"TH", v, sketches.SPARSE, P) + zlib.compress(b"\x00\x05\x00"),  # zero value
        header.pack(b"TH", v, sketches.DENSE, P) + zlib.compress(bytes(1 << 20)),  # inflates far too big
        exact[:-3],  # exact: not whole hashes
        exact[:5] + exact[13:21] + exact[5:13] + exact[21:],  # exact: not sorted
        exact + exact[-8:],  # exact: repeated hash
        exact[:2] + b"\x01" + exact[3:],  # format version 1: not read
        exact[:5] + bytes(8 * (EXACT_LIMIT + 1)),  # exact: too many
        pickle.dumps(HyperLogLog(0.01), 2),  # the seed's format
    ]


@pytest.mark.parametrize("data", corrupt_variants())
def test_given_corrupt_or_foreign_bytes_when_decoded_then_refused(data: bytes) -> None:
    with pytest.raises(SketchFormatError):
        sketches.decode(data)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=8), max_size=600), st.integers(4, 13))
def test_given_items_when_folded_to_lower_precision_then_same_as_adding_there(items: list[str], low: int) -> None:
    hashes = sketches.item_hashes(KEY, items)
    folded = sketches.fold(sketches.from_hashes(14, hashes), low)
    assert folded == sketches.from_hashes(low, hashes)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=700), st.sampled_from([0.26, 0.05, 0.01]))
def test_given_items_when_added_as_hashes_then_registers_equal_the_librarys_add_bulk(
    items: list[str], error_rate: float
) -> None:
    reference = HyperLogLog(error_rate)
    reference.add_bulk([sketches.keyed_item(KEY, item) for item in items])
    assert sketches.from_hashes(reference.p, sketches.item_hashes(KEY, items)).library() == reference


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 900), max_size=400), min_size=1, max_size=6), st.integers(10, 14))
def test_given_any_split_of_items_when_merged_then_equal_to_one_sketch_of_them_all(
    groups: list[list[int]], p: int
) -> None:
    parts = [sketches.from_hashes(p, sketches.item_hashes(KEY, (f"i{i}" for i in group))) for group in groups]
    everything = sketches.from_hashes(p, sketches.item_hashes(KEY, (f"i{i}" for group in groups for i in group)))
    merged = sketches.merge(parts, p)
    assert merged == everything
    assert sketches.estimate(merged) == sketches.estimate(everything)
    distinct = len({i for group in groups for i in group})
    if distinct <= EXACT_LIMIT:
        assert sketches.estimate(merged) == distinct


def test_given_sketches_of_two_precisions_when_merged_then_union_at_the_lower() -> None:
    a = sketches.from_hashes(14, keys(0, 3000))
    b = sketches.from_hashes(12, keys(2000, 5000))
    merged = sketches.merge([a, b], default_p=14)
    assert merged.p == 12
    assert merged == sketches.from_hashes(12, keys(0, 5000))
    assert sketches.merge([], default_p=P) == sketches.empty(P)


@pytest.mark.parametrize("n", [1_000, 100_000])
def test_given_n_distinct_items_when_counted_then_within_three_standard_errors_and_inside_a_wide_interval(
    n: int,
) -> None:
    sketch = sketches.from_hashes(P, keys(0, n))
    estimate = sketches.estimate(sketch)
    assert abs(estimate - n) <= 3 * sketches.standard_error(P) * n
    low, high = sketches.interval(sketch, z=3.0)
    assert low <= n <= high


def test_given_a_million_distinct_values_when_counted_in_bulk_then_within_three_standard_errors() -> None:
    n = 1_000_000
    values = np.random.default_rng(7).integers(0, 2**64, size=n, dtype=np.uint64, endpoint=False)
    sketch = sketches.empty(P)
    sketches.add_values(sketch, np.unique(values))
    distinct = len(np.unique(values))
    assert abs(sketches.estimate(sketch) - distinct) <= 3 * sketches.standard_error(P) * distinct


def test_given_sketch_when_the_same_items_are_added_again_then_estimate_unchanged() -> None:
    sketch = sketches.from_hashes(P, keys(0, 5000))
    before = sketches.estimate(sketch)
    sketches.add_values(sketch, sketches.hash_values(keys(0, 5000) * 3))
    sketches.add_values(sketch, sketches.hash_values(keys(100, 200)))
    assert sketches.estimate(sketch) == before
    assert sketch == sketches.from_hashes(P, keys(0, 5000))


@settings(max_examples=50, deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_given_one_item_when_hashed_under_two_keys_then_the_hashes_differ(item: str) -> None:
    other = b"another-item-key-" + bytes(range(32))
    assert sketches.item_hash(KEY, item) != sketches.item_hash(other, item)
    assert sketches.item_hash(KEY, item) == sketches.item_hash(KEY, item)


def test_given_a_keyed_item_hash_when_compared_with_the_unkeyed_library_hash_then_they_differ() -> None:
    # The library's own hash of the bare item: what a dictionary of guessed items would yield.
    guessed = [f"user-{i}@example.com" for i in range(200)]
    unkeyed = {sketches.hash_values(sha1(packb(item)).digest()[:8])[0] for item in guessed}
    stored = sketches.from_hashes(P, sketches.item_hashes(KEY, guessed)).exact
    assert stored is not None and len(stored) == len(guessed)
    assert not unkeyed & set(stored.tolist())
