"""HyperLogLog sketches: item keys, a compact versioned binary form, merging. Pure, no I/O.

Stored form (never pickle): a 5-byte header, then a zlib stream.
    magic b"TH" | format version (1) | kind | precision p
    DENSE  (kind 0): zlib(one byte per register, m = 2**p bytes)
    SPARSE (kind 1): zlib(uint16 big-endian index deltas of the non-zero registers, then
                     their values, one byte each); the first delta is the first index.
Encoding picks the smaller of the two, so a sketch of a few items takes a few hundred bytes
and a full one stays far below the 12 KB of a dense Redis HyperLogLog. Decoding checks every
field and bounds decompression, so a corrupt or foreign item is refused, never executed.

Items are hashed once, where they arrive, with the library's own hash (the first 8 bytes of
SHA-1 over the msgpack form). Applying those hashes here is the library's `add_bulk` minus its
per-item Python hashing loop, vectorised, so a sketch built from hashes equals one built by
`HyperLogLog.add_bulk(items)` register for register, at a fraction of the cost.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Iterable, Sequence
from hashlib import sha1
from typing import Any

import numpy as np
from hyperloglog import HyperLogLog
from hyperloglog import hll as _hll
from msgpack import packb

from chalicelib.core.errors import TallyError

MAGIC = b"TH"
FORMAT_VERSION = 1
DENSE = 0
SPARSE = 1
MIN_PRECISION = 4
MAX_PRECISION = 16
HEADER = struct.Struct(">2sBBB")
# An item enters a sketch as its 64-bit hash: queue messages stay small whatever the items.
HASH_BYTES = 8
# Sparse is only worth trying while few registers are set (3 bytes each against 1 per register).
_SPARSE_LIMIT_DIVISOR = 4


class SketchFormatError(TallyError):
    """Bytes that are not a sketch this code wrote."""


def item_hash(item: str) -> bytes:
    """The library's hash of an item, big-endian: what `HyperLogLog.add(item)` would compute."""
    return sha1(packb(item)).digest()[:HASH_BYTES]


def item_hashes(items: Iterable[str]) -> bytes:
    return b"".join(item_hash(item) for item in items)


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


def empty(p: int) -> HyperLogLog:
    return _with_registers(p, np.zeros(1 << p, np.uint8))


def from_hashes(p: int, hashes: bytes) -> HyperLogLog:
    sketch = empty(p)
    add_hashes(sketch, hashes)
    return sketch


def add_hashes(sketch: HyperLogLog, hashes: bytes) -> None:
    """Add items given as concatenated item_hash values (the library's add_bulk, pre-hashed)."""
    if len(hashes) % HASH_BYTES:
        raise ValueError("hashes must be whole 8-byte values")
    x = np.frombuffer(hashes, dtype=">u8").astype(np.uint64)
    if not len(x):
        return
    index = (x & np.uint64(sketch.m - 1)).astype(np.intp)
    rho = _hll.get_rho_vec(x >> np.uint64(sketch.p), 64 - sketch.p)
    np.maximum.at(sketch.M, index, rho.astype(sketch.M.dtype))


def _with_registers(p: int, registers: np.ndarray[Any, Any]) -> HyperLogLog:
    # The library has no constructor taking a precision or registers; its fields are public slots.
    sketch = HyperLogLog.__new__(HyperLogLog)
    sketch.p = p
    sketch.m = 1 << p
    sketch.alpha = _hll.get_alpha(p)
    sketch.M = np.asarray(registers, dtype=_hll.HLL_COUNTER_TYPE).copy()
    return sketch


def fold(sketch: HyperLogLog, p: int) -> HyperLogLog:
    """The same sketch at a lower precision, as if its items had been added at p.

    The register index is the hash's low bits and rho is taken above them, so register j at
    precision p' is the max of the registers whose index ends in j's p' bits.
    """
    if p > sketch.p:
        raise ValueError("a sketch cannot gain precision")
    if p == sketch.p:
        return _with_registers(p, sketch.M)
    return _with_registers(p, sketch.M.reshape(-1, 1 << p).max(axis=0))


def merge(sketches: Sequence[HyperLogLog], default_p: int) -> HyperLogLog:
    """The union of the sketches, at the lowest precision among them (default_p if none)."""
    if not sketches:
        return empty(default_p)
    p = min(s.p for s in sketches)
    result = fold(sketches[0], p)
    result.update(*(fold(s, p) for s in sketches[1:]))
    return result


def estimate(sketch: HyperLogLog) -> int:
    return 0 if not sketch.M.any() else int(round(sketch.card()))


# -- binary form -------------------------------------------------------------------------


def encode(sketch: HyperLogLog) -> bytes:
    registers = np.asarray(sketch.M, dtype=np.uint8)
    candidates = [_header(DENSE, sketch.p) + zlib.compress(registers.tobytes(), 9)]
    indices = np.flatnonzero(registers)
    if len(indices) <= len(registers) // _SPARSE_LIMIT_DIVISOR:
        deltas = np.diff(indices, prepend=0).astype(">u2")
        payload = deltas.tobytes() + registers[indices].tobytes()
        candidates.append(_header(SPARSE, sketch.p) + zlib.compress(payload, 9))
    return min(candidates, key=len)


def _header(kind: int, p: int) -> bytes:
    return HEADER.pack(MAGIC, FORMAT_VERSION, kind, p)


def decode(data: bytes) -> HyperLogLog:
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
    if kind == DENSE:
        registers = np.frombuffer(_inflate(data[HEADER.size :], m), dtype=np.uint8)
        if len(registers) != m:
            raise SketchFormatError(f"dense sketch has {len(registers)} registers, expected {m}")
    elif kind == SPARSE:
        registers = _sparse_registers(_inflate(data[HEADER.size :], 3 * m), m)
    else:
        raise SketchFormatError(f"unknown sketch kind {kind}")
    if registers.size and int(registers.max()) > 64 - p + 1:
        raise SketchFormatError("register value out of range")
    return _with_registers(p, registers)


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
