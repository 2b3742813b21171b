"""A bounded fuzz run over every route the app declares and every parameter it reads.

For each route (taken from the app object, so a new route is fuzzed without editing this file)
hypothesis sends about TALLY_FUZZ_EXAMPLES requests (300 by default) mixing well-formed input
with the kinds that used to escape as 5xx: deep nesting, lone surrogates, numbers outside
DynamoDB's range, digits `int()` refuses, huge windows, wrong types, broken bytes. Every answer:

- is never a 5xx;
- is, when 4xx, JSON in Chalice's error shape {"Code", "Message"};
- changes nothing when it is a rejection (no storage write succeeded while it was handled);
- did bounded work: at most one JSON document parsed, at most a histogram's cap of time
  buckets built, at most a fixed number of storage calls.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

import app as tally_app
from chalicelib.core import window_params
from tests.functional import work_meter
from tests.functional.work_meter import Meter

EXAMPLES = int(os.environ.get("TALLY_FUZZ_EXAMPLES", "300"))
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


def text_values() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(JUNK_TEXT), st.text(max_size=20))


def path_values() -> st.SearchStrategy[str]:
    safe = st.text(st.characters(blacklist_characters="/?#%", blacklist_categories=("Cs",)), min_size=1, max_size=30)
    return st.one_of(st.sampled_from(NAMES), safe)


def query_value(name: str) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(GOOD_QUERY[name]), text_values())


def scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**45), max_value=10**45),
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from([NOW, NOW + 10**9, 1e200, 1e-200, 2**63]),
        text_values(),
    )


def json_values() -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars(),
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(st.one_of(text_values(), st.sampled_from(["a"])), children, max_size=4),
        ),
        max_leaves=12,
    )


def field_values() -> st.SearchStrategy[Any]:
    good = st.sampled_from(["c", "visitors", "https://blog.example/a", "client-1", NOW, NOW - 60_000, 3600, {"a": 1}])
    return st.one_of(good, scalars(), json_values())


@st.composite
def shaped(draw: Any) -> Any:
    """A body shaped like one a route expects, some of its fields wrong."""
    event = draw(
        st.fixed_dictionaries(
            {"counter": field_values()},
            optional={
                "id": field_values(),
                "time": field_values(),
                "retention": field_values(),
                "attributes": field_values(),
            },
        )
    )
    view = draw(st.fixed_dictionaries({"url": field_values(), "time": field_values(), "clientId": field_values()}))
    data = draw(st.one_of(field_values(), st.lists(field_values(), max_size=5)))
    return draw(
        st.sampled_from(
            [event, {"events": [event, event]}, view, {"views": [view]}, {"data": data}, {"data": [data, "x"]}, {}]
        )
    )


def raw_bodies() -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.sampled_from(RAW_BODIES),
        st.binary(max_size=40),
    )


RAW_BODIES: list[bytes] = [
    b"",
    b"{",
    b"NaN",
    b"[" * 5000 + b"]" * 5000,
    b'{"data": ' + b"[" * 3000 + b"]" * 3000 + b"}",
    b'{"counter": "c", "attributes": {"amount": 1e+200}}',
    b'{"counter": "c", "attributes": {"amount": 1e999}}',
    b'{"data": "a\\ud800"}',
    b'{"counter": "c", "id": "\\udc00x"}',
    b"\xff\xfe\x00",
    b'{"counter": "c", "time": "2099-01-01T00:00:00Z"}',
    b'{"counter": "c", "n": ' + b"9" * 5000 + b"}",
    b'{"views": [' + b",".join([b'{"url": "u", "time": 1795000000000, "clientId": "c"}'] * 26) + b"]}",
]


def bodies() -> st.SearchStrategy[bytes]:
    encoded = st.one_of(shaped(), json_values()).map(lambda value: json.dumps(value).encode())
    return st.one_of(encoded, encoded, raw_bodies())


@st.composite
def requests(draw: Any, method: str, path: str) -> tuple[str, dict[str, str], bytes]:
    concrete = re.sub(r"{\w+}", lambda _: url_quote(draw(path_values())), path)
    names = draw(st.lists(st.sampled_from(QUERY_NAMES), unique=True, max_size=4))
    params = {name: draw(query_value(name)) for name in names}
    if params:
        concrete += "?" + urlencode(params, quote_via=url_quote)
    headers = {
        "Content-Type": draw(st.sampled_from(["application/json", "text/plain", "application/x-www-form-urlencoded"]))
    }
    body = draw(bodies()) if method in {"POST", "PUT", "PATCH"} else b""
    return concrete, headers, body


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
def test_given_any_input_on_a_route_when_requested_then_no_5xx_error_shape_nothing_written_bounded_work(
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

    # Every known kind of bad input first, each on its own; then hypothesis mixes them.
    for seed_path, seed_body in seeds(method, path):
        check(seed_path, {"Content-Type": "application/json"}, seed_body)

    @hypothesis_settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
    @given(requests(method, path))
    def one(request: tuple[str, dict[str, str], bytes]) -> None:
        check(*request)

    one()
    assert sum(seen.values()) >= min(EXAMPLES, 100), seen
