"""Work done on expensive requests before they are refused: checks first against parse-then-check.

    python -m bench.request_bounds [--megabytes 8]

Bodies: what it costs to refuse a body of nested event attributes, (a) larger than the body
cap and (b) under it but holding more values than allowed, through Tally's door
(chalicelib.core.inputs: size and value count on the raw bytes, then parse) against the
previous order (parse the whole body, measure the attributes with repr, convert every float,
then compare with the 16 KB limit). Time and peak traced memory, and their ratios.

Windows: the time buckets a histogram request builds before its answer, for a request of a
century at minute resolution: computed for the previous order (the whole bucket list was built,
then its length checked; computed here, not built), counted for Tally's.
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from chalicelib.core import inputs, timebuckets, times, window_params
from chalicelib.core.errors import ValidationError
from chalicelib.events import ingest


def nested_attributes_body(megabytes: float) -> bytes:
    one = {"a": [[1.5, 2], {"b": [3.25]}]}
    count = int(megabytes * 1_000_000 / len(json.dumps(one)))
    return json.dumps({"counter": "c", "attributes": {f"k{i}": one for i in range(count)}}).encode()


def previous_order(raw: bytes) -> None:
    """Parse, measure with repr, convert, then check the size (the order before the door checks)."""
    body = json.loads(raw)
    attributes = body["attributes"]
    size = len(repr(attributes))

    ingest._to_dynamodb_numbers(attributes)  # the conversion events still do, after the checks now
    if size > 16_384:
        raise ValidationError("attributes too large")


def door(raw: bytes) -> None:
    inputs.json_body(raw)


def measure(refuse: Callable[[bytes], None], raw: bytes) -> tuple[float, float]:
    tracemalloc.start()
    started = time.perf_counter()
    try:
        refuse(raw)
    except ValidationError:
        pass
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return elapsed, peak / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=8.0)
    args = parser.parse_args(argv)

    print("body                                   | design           |  seconds | peak MiB")
    for label, megabytes in [(f"{args.megabytes:g} MB, over the cap", args.megabytes), ("3 MB, too many values", 3.0)]:
        raw = nested_attributes_body(megabytes)
        label = f"{label} ({len(raw) / 2**20:.1f} MiB)"
        before = measure(previous_order, raw)
        after = measure(door, raw)
        print(f"{label:38} | parse then check | {before[0]:8.3f} | {before[1]:8.1f}")
        print(f"{'':38} | checks first     | {after[0]:8.3f} | {after[1]:8.1f}")
        print(
            f"{'':38} | ratio            | {before[0] / max(after[0], 1e-6):7.0f}x | "
            f"{before[1] / max(after[1], 1e-3):7.0f}x"
        )

    params = {"start": "2000-01-01T00:00:00Z", "end": "2099-12-31T00:00:00Z", "resolution": "minute"}
    first, last = times.parse(params["start"]) // 60_000, times.parse(params["end"]) // 60_000
    would_build = timebuckets.bucket_count(first, last, "minute")
    built = 0
    real_init = timebuckets.Bucket.__init__

    def counting_init(self: Any, *a: Any, **k: Any) -> None:
        nonlocal built
        built += 1
        real_init(self, *a, **k)

    timebuckets.Bucket.__init__ = counting_init  # type: ignore[method-assign]
    try:
        window_params.minute_range(params, 4_102_000_000_000)
    except ValidationError as exc:
        refused = str(exc)
    finally:
        timebuckets.Bucket.__init__ = real_init  # type: ignore[method-assign]
    print(
        f"\nhistogram 2000..2099 by minute: parse then check built {would_build:,} buckets; "
        f"checks first built {built} ({refused!r})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
