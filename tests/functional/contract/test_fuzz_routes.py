"""Every known kind of bad input on every route the app declares, with what only an in-process
run can see.

Generated requests (valid and invalid, from the OpenAPI document) are Schemathesis's job against
the local stack (tests/e2e/test_openapi_e2e.py): no 5xx, every answer documented and in its
shape. What it cannot see is measured here, for each route (taken from the app object, so a
new route is covered without editing this file) and each bad value that once escaped as a 5xx
(deep nesting, lone surrogates, numbers outside DynamoDB's range, digits `int()` refuses, huge
windows, wrong types, broken bytes), sent alone:

- never a 5xx, and a 4xx is JSON in Chalice's error shape {"Code", "Message"};
- a rejection changes nothing (no storage write succeeded while it was handled);
- bounded work: at most one JSON document parsed, at most a histogram's cap of time buckets
  built, at most a fixed number of storage calls.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote, urlencode

import pytest

import app as tally_app
from chalicelib.core import window_params
from tests.functional import work_meter
from tests.functional.work_meter import Meter

ROUTES = sorted(f"{method} {path}" for path, entries in tally_app.app.routes.items() for method in entries)
# Every query parameter a route reads; a parameter a route does not read must be harmless too.
QUERY_NAMES = ["window", "start", "end", "resolution", "url", "names", "limit", "source", "unknown"]
MAX_STORAGE_CALLS = 60
MAX_BUCKETS = window_params.MAX_HISTOGRAM_BUCKETS + 2 * 400 + 100  # a histogram, or a 400-day plan
NOW = 1_795_000_000_000

# -- what is sent -------------------------------------------------------------------------------

JUNK_TEXT = [
    "",
    " ",
    "a\ud800",
    "\udc00x",
    "²",
    "٣",
    "１２",
    "1_000",
    "-1",
    "0",
    "1e5",
    "NaN",
    "9" * 400,
    "x" * 5000,
    "\x00",
    "😀",
    "2099-12-31T00:00:00Z",
    "2000-01-01T00:00:00Z",
    "2026-11-18T10:00:00",
    "2026-11-18T10:00:00+00:00",
]
GOOD_QUERY = {
    "window": ["24h", "7d", "90m", "400d", "401d", "999999d", "0m", "5000m"],
    "start": [str(NOW - 3_600_000), "2026-11-18T00:00:00Z", "2000-01-01T00:00:00Z"],
    "end": [str(NOW), "2026-11-18T12:00:00Z", "2099-12-31T00:00:00Z"],
    "resolution": ["minute", "hour", "day", "week"],
    "url": ["https://blog.example/a", "u"],
    "names": ["a,b", "visitors", ",".join(f"n{i}" for i in range(60)), "a,,b"],
    "limit": ["1", "100", "1000", "1001", "0"],
    "source": ["events", "views", "uniques", "nope"],
    "unknown": ["1"],
}
NAMES = ["c", "visitors", "a.b:c-d_e", "x" * 200, "x" * 201, "20261118T000000000Z-20261118T010000000Z", ".."]


def url_quote(value: str, safe: str = "", encoding: str | None = None, errors: str | None = None) -> str:
    """As a client would put any string in a URL: its UTF-8 bytes, a lone surrogate's included."""
    return quote(value, safe=safe, encoding="utf-8", errors="surrogatepass")


RAW_BODIES: list[bytes] = [
    b"",
    b"{",
    b"NaN",
    b"[" * 5000 + b"]" * 5000,
    b'{"data": ' + b"[" * 3000 + b"]" * 3000 + b"}",
    b'{"counter": "c", "attributes": {"amount": 1e+200}}',
    b'{"counter": "c", "attributes": {"amount": 1e999}}',
    b'{"counter": "c", "attributes": {"amount": 10000000000000000000000000000000000000000}}',
    b'{"counter": "c", "attributes": {"amount": 1.234567890123456789012345678901234567E-130}}',
    b'{"counter": "c", "values": {"amount": 0E+999}}',
    b'{"counter": "c", "values": {"amount": 1.0000000000000000000000000000000000000000}}',
    b'{"counter": "c", "values": {"amount": 9.9999999999999999999999999999999999999E125}}',
    b'{"counter": "c", "values": {"amount": 1E-999999999}}',
    b'{"counter": "c", "values": {"amount": 1E99999999999999999999999}}',
    b'{"data": "a", "time": "2099-01-01T00:00:00Z"}',
    b'{"data": "a\\ud800"}',
    b'{"counter": "c", "id": "\\udc00x"}',
    b"\xff\xfe\x00",
    b'{"counter": "c", "time": "2099-01-01T00:00:00Z"}',
    b'{"counter": "c", "n": ' + b"9" * 5000 + b"}",
    b'{"views": [' + b",".join([b'{"url": "u", "time": 1795000000000, "clientId": "c"}'] * 26) + b"]}",
]


def seeds(method: str, path: str) -> list[tuple[str, bytes]]:
    """One request per known bad value: each path parameter, each query parameter, each body."""
    base = re.sub(r"{\w+}", "c", path)
    paths = [re.sub(r"{\w+}", url_quote(value), path) for value in JUNK_TEXT + NAMES if value] if "{" in path else []
    # Each value beside the parameters a route needs before it reads the others.
    paths += [
        f"{base}?{urlencode({'url': 'u', 'names': 'a', name: value}, quote_via=url_quote)}"
        for name in QUERY_NAMES
        for value in JUNK_TEXT + GOOD_QUERY[name]
    ]
    if method == "GET":
        return [(concrete, b"") for concrete in paths]
    # No write route reads the query string: its seeds are its path parameters and bodies.
    return [(concrete, b"{}") for concrete in paths if "?" not in concrete] + [(base, body) for body in RAW_BODIES]


# -- what is measured ---------------------------------------------------------------------------


@pytest.fixture
def meter(aws: Any, app_module: Any, monkeypatch: pytest.MonkeyPatch) -> Meter:
    return work_meter.install(aws, monkeypatch)


# -- the run ------------------------------------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
def test_given_each_known_bad_input_on_a_route_when_requested_then_no_5xx_error_shape_nothing_written_bounded_work(
    client: Any, clock: Any, meter: Meter, route: str
) -> None:
    method, path = route.split(" ", 1)
    seen: dict[int, int] = {}

    def check(concrete: str, headers: dict[str, str], body: bytes) -> None:
        meter.reset()
        response = client.http.request(method, concrete, headers=headers, body=body)
        seen[response.status_code] = seen.get(response.status_code, 0) + 1
        where = f"{method} {concrete[:200]} body={body[:200]!r}"
        assert response.status_code < 500, f"{where} -> {response.status_code} {response.body[:300]!r}"
        if response.status_code >= 400:
            answer = json.loads(response.body)
            assert isinstance(answer, dict) and set(answer) == {"Code", "Message"}, f"{where} -> {answer}"
            assert meter.writes == [], f"{where} was refused after writing: {meter.writes}"
        assert meter.parses <= 1, where
        assert meter.buckets <= MAX_BUCKETS, f"{where} built {meter.buckets} buckets"
        assert len(meter.calls) <= MAX_STORAGE_CALLS, f"{where} made {len(meter.calls)} storage calls"

    for seed_path, seed_body in seeds(method, path):
        check(seed_path, {"Content-Type": "application/json"}, seed_body)

    assert sum(seen.values()) >= 1, seen
