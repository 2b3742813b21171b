"""Unique-count sketches: exact while small, HyperLogLog registers beyond, and their stored form. Pure.
The form, and why the switch loses nothing: docs/design.md, "Unique counts"."""

from __future__ import annotations

import hmac
import math
import struct
import zlib
from collections.abc import Iterable, Sequence
from hashlib import sha1, sha256
from typing import Any

import numpy as np
from hyperloglog import HyperLogLog
from hyperloglog import hll as _hll
from msgpack import packb

from chalicelib.core.errors import TallyError

MAGIC = b"TH"
FORMAT_VERSION = 2
DENSE = 0
SPARSE = 1
EXACT = 2
MIN_PRECISION = 4
MAX_PRECISION = 16
HEADER = struct.Struct(">2sBBB")
HASH_BYTES = 8
EXACT_LIMIT = 300
# Sparse is only worth trying while few registers are set (3 bytes each against 1 per register).
_SPARSE_LIMIT_DIVISOR = 4
_HASHES = np.dtype(">u8")


class SketchFormatError(TallyError):
    """Bytes that are not a sketch this code wrote."""


class Sketch:
    """Registers at precision p, plus the exact hash set while it is small; `floor`, the least it answers."""

    __slots__ = ("M", "exact", "floor", "p")

    def __init__(self, p: int, registers: np.ndarray[Any, Any], exact: np.ndarray[Any, Any] | None, floor: int) -> None:
        self.p = p
        self.M = np.asarray(registers, dtype=np.uint8)
        self.exact = exact
        self.floor = 0 if exact is not None else floor

    @property
    def m(self) -> int:
        return 1 << self.p

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sketch):
            return NotImplemented
        if self.p != other.p or self.floor != other.floor or not np.array_equal(self.M, other.M):
            return False
        if self.exact is None or other.exact is None:
            return self.exact is None and other.exact is None
        return np.array_equal(self.exact, other.exact)

    def __repr__(self) -> str:
        state = f"exact {len(self.exact)}" if self.exact is not None else f"registers, floor {self.floor}"
        return f"Sketch(p={self.p}, {state})"

    def library(self) -> HyperLogLog:
        """The registers as the library's HyperLogLog (its estimator, its equality)."""
        # The library has no constructor taking a precision or registers; its fields are public slots.
        sketch = HyperLogLog.__new__(HyperLogLog)
        sketch.p = self.p
        sketch.m = self.m
        sketch.alpha = _hll.get_alpha(self.p)
        sketch.M = self.M.astype(_hll.HLL_COUNTER_TYPE)
        return sketch


def keyed_item(key: bytes, item: str) -> bytes:
    """The item under the stage's key (HMAC-SHA256): docs/tracker.md, "Keyed item hashes"."""
    return hmac.new(key, item.encode("utf-8"), sha256).digest()


def item_hash(key: bytes, item: str) -> bytes:
    """The library's hash of the keyed item, big-endian, as `HyperLogLog.add` computes it."""
    return sha1(packb(keyed_item(key, item))).digest()[:HASH_BYTES]


def item_hashes(key: bytes, items: Iterable[str]) -> bytes:
    return b"".join(item_hash(key, item) for item in items)


def precision_for(error_rate: float) -> int:
    """The library's register count for an error rate: p = ceil(log2((1.04 / error_rate)**2))."""
    if not 0 < error_rate < 1:
        raise ValueError("error rate must lie between 0 and 1")
    p = math.ceil(math.log2((1.04 / error_rate) ** 2))
    if not MIN_PRECISION <= p <= MAX_PRECISION:
        raise ValueError(f"error rate {error_rate} needs precision {p}, outside {MIN_PRECISION}-{MAX_PRECISION}")
    return p


def standard_error(p: int) -> float:
    return 1.04 / math.sqrt(1 << p)


def empty(p: int) -> Sketch:
    return Sketch(p, np.zeros(1 << p, np.uint8), np.zeros(0, np.uint64), 0)


def hash_values(hashes: bytes) -> np.ndarray[Any, Any]:
    if len(hashes) % HASH_BYTES:
        raise ValueError("hashes must be whole 8-byte values")
    return np.frombuffer(hashes, dtype=_HASHES).astype(np.uint64)


def from_hashes(p: int, hashes: bytes) -> Sketch:
    return _from_values(p, hash_values(hashes))


def _from_values(p: int, values: np.ndarray[Any, Any]) -> Sketch:
    sketch = empty(p)
    add_values(sketch, values)
    return sketch


def add_values(sketch: Sketch, x: np.ndarray[Any, Any]) -> None:
    if not len(x):
        return
    index = (x & np.uint64(sketch.m - 1)).astype(np.intp)
    rho = _hll.get_rho_vec(x >> np.uint64(sketch.p), 64 - sketch.p)
    np.maximum.at(sketch.M, index, rho.astype(np.uint8))
    if sketch.exact is not None:
        _keep_exact(sketch, np.union1d(sketch.exact, x))


def _keep_exact(sketch: Sketch, union: np.ndarray[Any, Any]) -> None:
    """Keep the union as the exact set, or leave the exact state for good if it grew too big."""
    if len(union) <= EXACT_LIMIT:
        sketch.exact = union
    else:
        sketch.exact = None
        sketch.floor = EXACT_LIMIT + 1


def fold(sketch: Sketch, p: int) -> Sketch:
    """The same sketch at a lower precision, as if its items had been added at p: docs/design.md, "Unique counts"."""
    if p > sketch.p:
        raise ValueError("a sketch cannot gain precision")
    if sketch.exact is not None:
        return _from_values(p, sketch.exact)
    registers = sketch.M.copy() if p == sketch.p else sketch.M.reshape(-1, 1 << p).max(axis=0)
    return Sketch(p, registers, None, sketch.floor)


def merge(sketches: Sequence[Sketch], default_p: int) -> Sketch:
    """The union of the sketches at their lowest precision (default_p if none), exact while every
    input is and the union is small: register for register one sketch built from all their items."""
    if not sketches:
        return empty(default_p)
    p = min(s.p for s in sketches)
    registers = np.zeros(1 << p, np.uint8)
    for s in sketches:
        np.maximum(registers, fold(s, p).M if s.p != p else s.M, out=registers)
    exact_parts = [s.exact for s in sketches if s.exact is not None]
    union = np.unique(np.concatenate(exact_parts)) if exact_parts else np.zeros(0, np.uint64)
    result = Sketch(p, registers, None, max((s.floor for s in sketches if s.exact is None), default=0))
    if len(exact_parts) == len(sketches) or len(union) > EXACT_LIMIT:
        _keep_exact(result, union)
    return result


def estimate(sketch: Sketch) -> int:
    if sketch.exact is not None:
        return len(sketch.exact)
    if not sketch.M.any():
        return 0
    return max(int(round(sketch.library().card())), sketch.floor)


def is_exact(sketch: Sketch) -> bool:
    return sketch.exact is not None


def interval(sketch: Sketch, z: float = 1.96) -> tuple[int, int]:
    """A 95% interval around the estimate: the count itself when exact, never below the sketch's floor."""
    value = estimate(sketch)
    if sketch.exact is not None:
        return value, value
    spread = z * standard_error(sketch.p) * value
    return max(math.floor(value - spread), sketch.floor), math.ceil(value + spread)


# -- binary form -------------------------------------------------------------------------


def encode(sketch: Sketch) -> bytes:
    if sketch.exact is not None:
        return HEADER.pack(MAGIC, FORMAT_VERSION, EXACT, sketch.p) + sketch.exact.astype(_HASHES).tobytes()
    candidates = [HEADER.pack(MAGIC, FORMAT_VERSION, DENSE, sketch.p) + zlib.compress(sketch.M.tobytes(), 9)]
    indices = np.flatnonzero(sketch.M)
    if len(indices) <= sketch.m // _SPARSE_LIMIT_DIVISOR:
        payload = np.diff(indices, prepend=0).astype(">u2").tobytes() + sketch.M[indices].tobytes()
        candidates.append(HEADER.pack(MAGIC, FORMAT_VERSION, SPARSE, sketch.p) + zlib.compress(payload, 9))
    return min(candidates, key=len)


def decode(data: bytes) -> Sketch:
    if len(data) < HEADER.size:
        raise SketchFormatError("too short to be a sketch")
    magic, version, kind, p = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise SketchFormatError("not a sketch (bad magic)")
    if version != FORMAT_VERSION:
        raise SketchFormatError(f"unknown sketch format version {version}")
    if not MIN_PRECISION <= p <= MAX_PRECISION:
        raise SketchFormatError(f"precision {p} out of range")
    m = 1 << p
    payload = data[HEADER.size :]
    if kind == EXACT:
        if len(payload) % HASH_BYTES or len(payload) // HASH_BYTES > EXACT_LIMIT:
            raise SketchFormatError(f"an exact sketch holds 0-{EXACT_LIMIT} hashes of {HASH_BYTES} bytes")
        values = hash_values(payload)
        if not (values[1:] > values[:-1]).all():
            raise SketchFormatError("exact hashes must be strictly increasing")
        return _from_values(p, values)
    if kind == DENSE:
        registers = np.frombuffer(_inflate(payload, m), dtype=np.uint8)
        if len(registers) != m:
            raise SketchFormatError(f"dense sketch has {len(registers)} registers, expected {m}")
    elif kind == SPARSE:
        registers = _sparse_registers(_inflate(payload, 3 * m), m)
    else:
        raise SketchFormatError(f"unknown sketch kind {kind}")
    if registers.size and int(registers.max()) > 64 - p + 1:
        raise SketchFormatError("register value out of range")
    return Sketch(p, registers.copy(), None, EXACT_LIMIT + 1)


def _inflate(payload: bytes, limit: int) -> bytes:
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(payload, limit)
    except zlib.error as exc:
        raise SketchFormatError(f"corrupt sketch payload: {exc}") from exc
    if inflater.unconsumed_tail or not inflater.eof or inflater.unused_data:
        raise SketchFormatError("sketch payload has the wrong length")
    return raw


def _sparse_registers(raw: bytes, m: int) -> np.ndarray[Any, Any]:
    if len(raw) % 3:
        raise SketchFormatError("sparse payload is not a whole number of entries")
    n = len(raw) // 3
    deltas = np.frombuffer(raw[: 2 * n], dtype=">u2").astype(np.int64)
    values = np.frombuffer(raw[2 * n :], dtype=np.uint8)
    if n and ((deltas[1:] == 0).any() or not values.all()):
        raise SketchFormatError("sparse entries must be increasing and non-zero")
    indices = np.cumsum(deltas)
    if n and indices[-1] >= m:
        raise SketchFormatError("sparse index out of range")
    registers = np.zeros(m, np.uint8)
    registers[indices] = values
    return registers
