"""Sketch encoding, folding, merging and accuracy (pure, no I/O)."""

from __future__ import annotations

import pickle
import zlib

import numpy as np
import pytest
from hyperloglog import HyperLogLog
from hypothesis import given, settings
from hypothesis import strategies as st

from chalicelib.uniques import sketch_encoding as sketches
from chalicelib.uniques.sketch_encoding import SketchFormatError

P = sketches.precision_for(0.01)


def keys(start: int, stop: int) -> bytes:
    return sketches.item_hashes(f"visitor-{i}" for i in range(start, stop))


def test_given_error_rate_when_precision_computed_then_it_matches_the_library() -> None:
    for rate in (0.26, 0.05, 0.01, 0.005):
        assert sketches.precision_for(rate) == HyperLogLog(rate).p
    with pytest.raises(ValueError):
        sketches.precision_for(0.001)


@pytest.mark.parametrize("n", [0, 1, 10, 300, 5000, 200_000])
def test_given_sketch_when_encoded_and_decoded_then_registers_and_estimate_survive(n: int) -> None:
    sketch = sketches.empty(P)
    if n:
        sketch.add_bulk(range(n))
    data = sketches.encode(sketch)
    back = sketches.decode(data)
    assert back == sketch and back.p == sketch.p
    assert sketches.estimate(back) == sketches.estimate(sketch)


def test_given_empty_and_small_sketches_when_encoded_then_sparse_and_under_1kb() -> None:
    for n in (0, 10, 99):
        data = sketches.encode(sketches.from_hashes(P, keys(0, n)))
        assert data[3] == sketches.SPARSE
        assert len(data) < 1024


def test_given_full_sketch_when_encoded_then_dense_and_under_12kb() -> None:
    sketch = sketches.empty(P)
    sketch.add_bulk(range(300_000))
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
    sketch = sketches._with_registers(10, m)
    assert np.array_equal(sketches.decode(sketches.encode(sketch)).M, sketch.M)


def corrupt_variants() -> list[bytes]:
    good = sketches.encode(sketches.from_hashes(P, keys(0, 50)))
    dense = sketches.encode(sketches.from_hashes(P, keys(0, 20_000)))
    header = sketches.HEADER
    overflow = np.zeros(1 << P, np.uint8)
    overflow[3] = 64
    return [
        b"",
        b"TH\x01",
        b"XX" + good[2:],  # magic
        good[:2] + b"\x02" + good[3:],  # format version
        good[:3] + b"\x07" + good[4:],  # kind
        good[:4] + b"\x03" + good[5:],  # precision below range
        good[:4] + b"\x11" + good[5:],  # precision above range
        good[:-3],  # truncated
        good + b"junk",  # trailing bytes
        good[:5] + bytes(b ^ 0xFF for b in good[5:]),  # flipped payload
        dense[:4] + bytes([P - 1]) + dense[5:],  # too many registers for the precision
        header.pack(b"TH", 1, sketches.DENSE, P) + zlib.compress(overflow.tobytes()),  # rho too large
        header.pack(b"TH", 1, sketches.SPARSE, P) + zlib.compress(b"\x00\x05\x00\x00\x01\x01"),  # repeat index
        header.pack(b"TH", 1, sketches.SPARSE, P) + zlib.compress(b"\xff\xff\x01"),  # index beyond m
        header.pack(b"TH", 1, sketches.SPARSE, P) + zlib.compress(b"\x00\x05\x00"),  # zero value
        header.pack(b"TH", 1, sketches.DENSE, P) + zlib.compress(bytes(1 << 20)),  # inflates far too big
        pickle.dumps(HyperLogLog(0.01), 2),  # the seed's format
    ]


@pytest.mark.parametrize("data", corrupt_variants())
def test_given_corrupt_or_foreign_bytes_when_decoded_then_refused(data: bytes) -> None:
    with pytest.raises(SketchFormatError):
        sketches.decode(data)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=8), max_size=300), st.integers(4, 13))
def test_given_items_when_folded_to_lower_precision_then_same_as_adding_there(items: list[str], low: int) -> None:
    hashes = sketches.item_hashes(items)
    folded = sketches.fold(sketches.from_hashes(14, hashes), low)
    assert folded == sketches.from_hashes(low, hashes)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=400), st.sampled_from([0.26, 0.05, 0.01]))
def test_given_items_when_added_as_hashes_then_registers_equal_the_librarys_add_bulk(
    items: list[str], error_rate: float
) -> None:
    library = HyperLogLog(error_rate)
    library.add_bulk(items)
    assert sketches.from_hashes(library.p, sketches.item_hashes(items)) == library


def test_given_sketches_of_two_precisions_when_merged_then_union_at_the_lower() -> None:
    a = sketches.from_hashes(14, keys(0, 3000))
    b = sketches.from_hashes(12, keys(2000, 5000))
    merged = sketches.merge([a, b], default_p=14)
    assert merged.p == 12
    assert merged == sketches.from_hashes(12, keys(0, 5000))
    assert sketches.merge([], default_p=P) == sketches.empty(P)


@pytest.mark.parametrize("n", [1_000, 100_000])
def test_given_n_distinct_items_when_counted_then_within_three_standard_errors(n: int) -> None:
    estimate = sketches.estimate(sketches.from_hashes(P, keys(0, n)))
    assert abs(estimate - n) <= 3 * sketches.standard_error(P) * n


def test_given_a_million_distinct_values_when_counted_in_bulk_then_within_three_standard_errors() -> None:
    n = 1_000_000
    sketch = sketches.empty(P)
    sketch.add_bulk(np.arange(n, dtype=np.int64).tolist())
    assert abs(sketches.estimate(sketch) - n) <= 3 * sketches.standard_error(P) * n


def test_given_sketch_when_the_same_items_are_added_again_then_estimate_unchanged() -> None:
    sketch = sketches.from_hashes(P, keys(0, 5000))
    before = sketches.estimate(sketch)
    sketches.add_hashes(sketch, keys(0, 5000) * 3)
    sketches.add_hashes(sketch, keys(100, 200))
    assert sketches.estimate(sketch) == before
    assert sketch == sketches.from_hashes(P, keys(0, 5000))
