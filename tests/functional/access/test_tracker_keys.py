"""Tracker keys over HTTP: page views of their own sites only, from their own pages, refused
everywhere else; and every key's request rate (429 with Retry-After, other keys untouched)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from chalicelib.access import policy, rates, tracker
from chalicelib.core import keyspace
from tests.conftest import create_key
from tests.functional.helpers import declared_routes
from tests.functional.site_helpers import SETTINGS, Counting, beacon, left_behind

SITE, ORIGIN = "blog.example", "https://blog.example"
MINUTE = 60_000


@pytest.fixture
def tracker_key(aws: Any) -> str:
    return create_key(aws, ["tracker"], sites=[SITE, "*.docs.example"])


def view(clock: Any, url: str = f"{ORIGIN}/posts/1", ago_ms: int = 0, **more: Any) -> dict[str, Any]:
    return {"url": url, "time": clock.now - ago_ms, "referrer": "", "width": 1280, **more}


def refused(response: Any, status: int, clue: str) -> bool:
    body = json.loads(response.body or b"{}")
    return response.status_code == status and set(body) == {"Code", "Message"} and clue in body["Message"]


def pageviews(client: Any, site: str) -> int:
    return int(client.http.get(f"/counters/site:{site}?window=1d").json_body["count"])


# -- creating one ------------------------------------------------------------------------------


def test_given_a_tracker_key_request_when_posted_then_the_key_lists_its_sites_and_its_scopes_default_rate(
    client: Any,
) -> None:
    created = client.http.post("/keys", body=json.dumps({"scopes": ["tracker"], "sites": ["www.Blog.example"]}))
    made = client.http.post("/keys", body=json.dumps({"scopes": ["tracker"], "sites": ["www.blog.example", "*.b.c"]}))

    assert created.status_code == 400  # hostnames as URLs read them: lower case
    assert made.status_code == 201, made.body
    body = json.loads(made.body)
    assert body["scopes"] == ["tracker"] and body["sites"] == [SITE, "*.b.c"]
    assert body["rate_per_second"] == policy.DEFAULT_RATES[policy.TRACKER]
    listed = {k["id"]: k for k in json.loads(client.http.get("/keys").body)["keys"]}
    assert listed[body["id"]]["sites"] == [SITE, "*.b.c"]


@pytest.mark.parametrize(
    "body",
    [
        {"scopes": ["tracker"]},
        {"scopes": ["tracker"], "sites": []},
        {"scopes": ["tracker", "ingest"], "sites": [SITE]},
        {"scopes": ["tracker"], "sites": [SITE], "prefix": "site:"},
        {"scopes": ["tracker"], "sites": [SITE], "origins": [ORIGIN]},
        {"scopes": ["tracker"], "sites": [ORIGIN]},
        {"scopes": ["tracker"], "sites": ["blog.example/"]},
        {"scopes": ["ingest"], "sites": [SITE]},
        {"scopes": ["tracker"], "sites": [SITE] * (tracker.MAX_SITES + 1)},
        {"scopes": ["read"], "rate_per_second": 0},
        {"scopes": ["read"], "rate_per_second": policy.RATE_MAX + 1},
        {"scopes": ["read"], "rate_per_second": True},
        {"scopes": ["read"], "rate_per_second": 1.5},
    ],
)
def test_given_a_bad_tracker_or_rate_request_when_posted_then_400_and_no_key_stored(client: Any, body: Any) -> None:
    before = len(json.loads(client.http.get("/keys").body)["keys"])

    response = client.http.post("/keys", body=json.dumps(body).encode())

    assert response.status_code == 400 and json.loads(response.body)["Code"] == "BadRequestError", response.body
    assert len(json.loads(client.http.get("/keys").body)["keys"]) == before


# -- where it is refused -----------------------------------------------------------------------


def test_given_a_tracker_key_when_it_calls_every_other_route_then_each_refuses_it_and_nothing_is_stored(
    client: Any, aws: Any, app_module: Any, tracker_key: str
) -> None:
    failures, checked = [], 0
    for method, path in sorted(declared_routes(app_module.app)):
        entry = app_module.app.routes[path][method]
        access = policy.route_access(method, path, entry.authorizer.name if entry.authorizer else None)
        if access.scope is None or access.tracker:  # public (no key at all), or its own route
            continue
        concrete = re.sub(r"\{key_id\}", "0123456789abcdef", path)
        concrete = re.sub(r"\{[^}]+\}", "site:blog.example", concrete)
        body = json.dumps({"counter": "billing.revenue", "retention": 315_360_000, "values": {"amount": -5}})
        headers = {"Content-Type": "text/plain", "Origin": ORIGIN}
        if access.beacon:
            response = client.http.with_key(None).request(
                method, f"{concrete}?key={tracker_key}", headers=headers, body=body.encode()
            )
        else:
            response = client.http.with_key(tracker_key).request(method, concrete, headers=headers, body=body.encode())
        checked += 1
        if not refused(response, 403, "tracker key"):
            failures.append(f"{method} {path}: {response.status_code} {response.body[:200]!r}")

    assert failures == []
    assert checked >= 25  # every guarded route of the app
    assert left_behind(aws) == 0


@pytest.mark.parametrize(
    "url",
    [
        "https://shop.victim/cart",
        "https://blog.example.evil/",
        "https://evilblog.example/",
        "https://sub.blog.example/",  # a subdomain of a site listed without `*.`
        "https://docs.example/",  # `*.docs.example` is its subdomains only
        "ftp://blog.example/",
    ],
)
def test_given_a_tracker_key_when_a_page_of_another_site_is_sent_then_refused_and_nothing_counted(
    client: Any, aws: Any, clock: Any, tracker_key: str, url: str
) -> None:
    origin = url.split("/", 3)
    answer = beacon(client, tracker_key, view(clock, url), origin="/".join(origin[:3]))

    assert answer.status_code in (400, 403) and set(answer.json_body) == {"Code", "Message"}, answer.body
    assert left_behind(aws) == 0


@pytest.mark.parametrize(
    ("url", "origin", "site"),
    [
        (f"{ORIGIN}/a", ORIGIN, SITE),
        ("https://www.blog.example/a", "https://www.blog.example", "www.blog.example"),  # `www.` matches
        ("https://a.b.docs.example/a", "https://a.b.docs.example", "a.b.docs.example"),  # `*.`: any depth
        ("http://blog.example:8080/a", "http://blog.example:8080", SITE),  # ports compared when the URL has one
        ("http://blog.example/a", "http://blog.example:8000", SITE),  # tally.js sends the URL without its port
    ],
)
def test_given_a_tracker_key_when_a_page_of_its_sites_is_sent_from_its_origin_then_counted(
    client: Any, aws: Any, clock: Any, tracker_key: str, url: str, origin: str, site: str
) -> None:
    answer = beacon(client, tracker_key, view(clock, url), origin=origin)

    assert answer.status_code == 202, answer.body
    assert answer.json_body == {"counted": True, "site": site}
    assert answer.headers["Access-Control-Allow-Origin"] == origin


@pytest.mark.parametrize(
    ("origin", "body", "status", "clue"),
    [
        ("https://shop.victim", {}, 403, "Origin"),
        (None, {}, 403, "Origin"),
        ("http://blog.example", {}, 403, "Origin"),  # another scheme
        ("null", {}, 403, "Origin"),  # a sandboxed page
        ("https://blog.example:8443", {"url": "https://blog.example:443/a"}, 403, "Origin"),
        (ORIGIN, {"site": "shop.victim"}, 403, "site must be"),
        (ORIGIN, {"site": "www.shop.victim"}, 403, "site must be"),
        (ORIGIN, {"time_ago": 10 * MINUTE}, 403, "old"),  # backdated
        (ORIGIN, {"time_ago": 2 * 86_400_000}, 403, "old"),
        (ORIGIN, {"event": "signup", "values": {"amount": -1}}, 403, "values"),
        (ORIGIN, {"event": "signup", "values": {"amount": tracker.VALUE_MAX + 1}}, 403, "values"),
        (ORIGIN, {"event": "signup", "values": {"amount": "12"}}, 403, "values"),
        (ORIGIN, {"retention": 315_360_000}, 400, "unknown fields"),  # the beacon sets it: no field for it
        (ORIGIN, {"event": "signup", "attributes": {"plan": "pro"}}, 400, "unknown fields"),
        (ORIGIN, {"url": "not a url"}, 400, "url"),
    ],
)
def test_given_a_tracker_key_when_a_beacon_breaks_one_of_its_rules_then_refused_with_why_and_nothing_counted(
    client: Any,
    aws: Any,
    clock: Any,
    tracker_key: str,
    origin: str | None,
    body: dict[str, Any],
    status: int,
    clue: str,
) -> None:
    sent = view(clock, ago_ms=body.pop("time_ago", 0), **body)

    answer = beacon(client, tracker_key, sent, origin=origin)

    assert refused(answer, status, clue), answer.body
    assert left_behind(aws) == 0


def test_given_a_tracker_key_when_it_sends_a_custom_event_within_its_bounds_then_counted_under_its_site(
    client: Any, aws: Any, clock: Any, tracker_key: str
) -> None:
    counting = Counting(client, aws)
    sent = view(clock, ago_ms=4 * MINUTE, site=SITE, event="signup", values={"amount": tracker.VALUE_MAX})

    answer = beacon(client, tracker_key, sent, origin=ORIGIN)
    counting.process()

    assert answer.status_code == 202, answer.body
    counted = client.http.get(f"/counters/site-event:{SITE}:signup?window=1d").json_body
    assert counted["count"] == 1 and counted["sums"]["amount"] == tracker.VALUE_MAX


def test_given_an_ingest_key_when_it_sends_a_page_view_then_its_origins_apply_as_before(
    client: Any, aws: Any, clock: Any
) -> None:
    """Ingest keys keep `origins`: a header check (docs/access.md), not a list of sites."""
    key = create_key(aws, ["ingest"], origins=[ORIGIN])

    other_site = beacon(client, key, view(clock, "https://shop.example/a"), origin=ORIGIN)
    other_origin = beacon(client, key, view(clock), origin="https://shop.example")

    assert other_site.status_code == 202 and other_site.json_body["site"] == "shop.example"
    assert other_origin.status_code == 403


# -- limits per key ----------------------------------------------------------------------------


def rate_items(aws: Any) -> list[dict[str, Any]]:
    """The keys' rate counts in the counts table (access/rates.py)."""
    items = aws.dynamodb.scan(TableName=SETTINGS.counts_table)["Items"]
    return [item for item in items if item["pk"]["S"].startswith(keyspace.KEY_RATE)]


def test_given_one_key_flooding_when_over_its_rate_then_429_with_retry_after_and_another_keys_page_views_all_count(
    client: Any, aws: Any, clock: Any
) -> None:
    flooder = create_key(aws, ["tracker"], sites=[SITE], rate_per_second=5)
    other = create_key(aws, ["tracker"], sites=["other.example"], rate_per_second=5)
    counting = Counting(client, aws)

    flood, others = [], []
    for i in range(40):  # within one second of the (stopped) clock
        flood.append(beacon(client, flooder, view(clock, f"{ORIGIN}/f{i}"), origin=ORIGIN))
        if i % 8 == 0:
            others.append(
                beacon(client, other, view(clock, f"https://other.example/o{i}"), origin="https://other.example")
            )
    counting.process()

    # One process: its allowance, then the rate counted in the table.
    admitted = rates.ALLOWANCE + 5
    assert [a.status_code for a in flood] == [202] * admitted + [429] * (40 - admitted)
    assert all(refused(a, 429, "over its 5 requests a second") for a in flood[admitted:])
    assert {a.headers.get("Retry-After") for a in flood[admitted:]} == {"1"}
    assert {a.headers.get("Access-Control-Allow-Origin") for a in flood[admitted:]} == {ORIGIN}  # the page can read why
    assert [a.status_code for a in others] == [202] * 5
    assert pageviews(client, SITE) == admitted  # a refused request did no work
    assert pageviews(client, "other.example") == 5

    clock.advance(1000)
    assert beacon(client, flooder, view(clock, f"{ORIGIN}/next"), origin=ORIGIN).status_code == 202


def test_given_a_header_key_over_its_rate_when_it_calls_then_429_before_the_route_and_its_other_requests_resume(
    client: Any, aws: Any, clock: Any
) -> None:
    writer = client.http.with_key(create_key(aws, ["ingest"], rate_per_second=3))
    body = json.dumps({"counter": "signups"}).encode()

    answers = [writer.post("/events", headers={"Content-Type": "application/json"}, body=body) for _ in range(6)]

    assert [a.status_code for a in answers] == [201] * (rates.ALLOWANCE + 3) + [429] * (3 - rates.ALLOWANCE)
    assert answers[-1].headers["Retry-After"] == "1" and json.loads(answers[-1].body)["Code"] == "TooManyRequestsError"
    assert len(aws.dynamodb.scan(TableName=SETTINGS.events_table)["Items"]) == rates.ALLOWANCE + 3
    assert client.http.get("/counters/signups").status_code == 200  # the admin key has its own rate


def test_given_a_keys_requests_a_second_apart_when_each_is_admitted_then_no_rate_count_is_written(
    client: Any, aws: Any, clock: Any
) -> None:
    key = create_key(aws, ["tracker"], sites=[SITE], rate_per_second=1)

    answers = []
    for i in range(5):
        answers.append(beacon(client, key, view(clock, f"{ORIGIN}/s{i}"), origin=ORIGIN))
        clock.advance(1000)

    assert [a.status_code for a in answers] == [202] * 5
    assert rate_items(aws) == []  # each within its process's allowance: no write


def test_given_two_processes_when_one_key_floods_both_then_each_adds_its_allowance_to_the_shared_count(
    client: Any, aws: Any, clock: Any
) -> None:
    key = create_key(aws, ["tracker"], sites=[SITE], rate_per_second=3)

    first = [beacon(client, key, view(clock, f"{ORIGIN}/a{i}"), origin=ORIGIN) for i in range(6)]
    rates.allowances.clear()  # a second process, with its own memory, in the same second
    second = [beacon(client, key, view(clock, f"{ORIGIN}/b{i}"), origin=ORIGIN) for i in range(3)]

    assert [a.status_code for a in first] == [202] * (rates.ALLOWANCE + 3) + [429] * (3 - rates.ALLOWANCE)
    assert [a.status_code for a in second] == [202] * rates.ALLOWANCE + [429] * (3 - rates.ALLOWANCE)
    assert [item["n"]["N"] for item in rate_items(aws)] == ["3"]  # the allowances were never written
