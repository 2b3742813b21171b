"""Keys over real HTTP against the local stack: its admin key, a key created then revoked, beacons,
names with every character a name may hold."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import requests

from tests.e2e.stack import LocalStack, running_stack, wait_for

pytestmark = pytest.mark.e2e
SITE = "https://site.example"
CACHE_SECONDS = 10


def test_given_the_local_admin_key_then_it_works_and_requests_without_a_key_get_json_refusals(
    local_stack: LocalStack,
) -> None:
    assert local_stack.admin_key.startswith("tly_")
    assert local_stack.get("/counters/e2e.access").status_code == 200
    assert local_stack.get("/keys").status_code == 200

    missing = local_stack.get("/counters/e2e.access", key=None, headers={"Origin": SITE})
    unknown = local_stack.get("/no/such/route")

    assert missing.status_code == 401 and missing.json()["Code"] == "UnauthorizedError"
    assert missing.headers["Access-Control-Allow-Origin"] == SITE
    assert unknown.status_code == 404 and unknown.json()["Code"] == "NotFoundError"


def test_given_a_key_created_over_http_when_revoked_then_it_stops_working_within_the_key_cache(
    tmp_path: Path,
) -> None:
    """As on API Gateway, the key's cached answer outlives the revocation by up to
    KEY_CACHE_SECONDS (a stack of its own, with a short cache)."""
    with running_stack(tmp_path, KEY_CACHE_SECONDS=str(CACHE_SECONDS)) as stack:
        created = stack.post("/keys", json={"scopes": ["read"], "prefix": "e2e.", "note": "e2e"})
        assert created.status_code == 201, created.text
        key, key_id = created.json()["key"], created.json()["id"]

        cached_at = time.monotonic()
        assert stack.get("/counters/e2e.visits", key=key).status_code == 200
        assert stack.get("/counters/other", key=key).status_code == 403
        assert stack.post("/events", key=key, json={"counter": "e2e.visits"}).status_code == 403
        assert key not in stack.get("/keys").text

        revoked_at = time.monotonic()
        assert stack.request("DELETE", f"/keys/{key_id}").status_code == 200
        if time.monotonic() - cached_at < CACHE_SECONDS / 2:  # the key's answer is still cached
            assert stack.get("/counters/other", key=key).status_code == 403  # the prefix, at the route
            assert stack.get("/counters/e2e.visits", key=key).status_code == 200
        (refused,) = wait_for(  # a list: a 401 Response is falsy
            lambda: [r] if (r := stack.get("/counters/e2e.visits", key=key)).status_code == 401 else None,
            CACHE_SECONDS + 30,
            "the revocation to take effect",
        )
        assert refused.json()["Message"] == "a valid key is needed: send Authorization: Bearer <key>"
        assert time.monotonic() - revoked_at <= CACHE_SECONDS + 30


# Every kind of character a name may hold besides letters and digits: `:`, `.`, `-`, `_`.
PUNCTUATED = ["e2e:a:b", "e2e.site:b", "e2e-x_y.z:1", "e2e::"]


def test_given_names_with_colons_dots_dashes_and_underscores_then_every_route_counts_them_and_keys_stay_valid(
    local_stack: LocalStack,
) -> None:
    """The stack's gateway caches each key's first answer for KEY_CACHE_SECONDS (300 s), as
    API Gateway does: the answer made for `/counters/e2e:a:b` is the one every later request
    of the key meets."""
    reader = local_stack.post("/keys", json={"scopes": ["read"]}).json()["key"]
    writer = local_stack.post("/keys", json={"scopes": ["ingest"]}).json()["key"]
    text = {"Content-Type": "text/plain;charset=UTF-8"}
    failures = []
    for name in PUNCTUATED:
        sent = {
            "GET /counters": local_stack.get(f"/counters/{name}", key=reader),
            "POST /events": local_stack.post("/events", key=writer, json={"counter": name}),
            "POST /beacon/events": local_stack.post(
                f"/beacon/events?key={writer}", key=None, headers=text, data=json.dumps({"counter": name})
            ),
            "POST /hyperloglog": local_stack.post(f"/hyperloglog/{name}", key=writer, json={"data": "visitor-1"}),
            "POST /beacon/hyperloglog": local_stack.post(
                f"/beacon/hyperloglog/{name}?key={writer}", key=None, headers=text, data='{"data": "visitor-2"}'
            ),
            "GET /counters/histogram": local_stack.get(f"/counters/{name}/histogram", key=reader),
            "GET /hyperloglog": local_stack.get(f"/hyperloglog/{name}", key=reader),
            "GET /hyperloglog/histogram": local_stack.get(f"/hyperloglog/{name}/histogram", key=reader),
        }
        failures += [
            f"{route} {name}: {r.status_code} {r.text[:200]}" for route, r in sent.items() if r.status_code >= 300
        ]
    assert failures == []

    for name in PUNCTUATED:  # both events and both visitors of each name were counted
        counted = wait_for(
            lambda name=name: (
                local_stack.get(f"/counters/{name}", key=reader, params={"window": "1h"}).json()["count"] == 2
            ),
            60,
            f"events of {name} to be counted",
        )
        assert counted
        assert wait_for(
            lambda name=name: local_stack.get(f"/hyperloglog/{name}", key=reader).json()["cardinality"] == 2,
            90,
            f"visitors of {name} to be counted",
        )
    # Routes the keys had not called before still take them.
    assert local_stack.get("/reports", key=reader).status_code == 200
    assert local_stack.get("/hyperloglog", key=reader, params={"names": ",".join(PUNCTUATED)}).status_code == 200
    view = {"url": "https://site.example/a:b", "time": int(time.time() * 1000), "clientId": "c-1"}
    assert local_stack.post("/views", key=writer, json=view).status_code == 202


def test_given_an_ingest_key_limited_to_a_site_when_a_beacon_posts_text_then_accepted_only_from_that_site(
    local_stack: LocalStack,
) -> None:
    key = local_stack.post("/keys", json={"scopes": ["ingest"], "origins": [SITE]}).json()["key"]
    beacon = '{"data": "visitor-1"}'

    def send(origin: str) -> requests.Response:
        return local_stack.post(
            f"/beacon/hyperloglog/e2e.beacon?key={key}",
            key=None,
            data=beacon,
            headers={"Content-Type": "text/plain;charset=UTF-8", "Origin": origin},
        )

    accepted, refused = send(SITE), send("https://elsewhere.example")

    assert accepted.status_code == 202, accepted.text
    assert accepted.headers["Access-Control-Allow-Origin"] == SITE
    assert refused.status_code == 403 and refused.json()["Message"] == f"this key only works from the origins {SITE}"
    preflight = local_stack.request(
        "OPTIONS", "/events", key=None, headers={"Origin": SITE, "Access-Control-Request-Method": "POST"}
    )
    assert preflight.status_code == 204 and preflight.headers["Access-Control-Allow-Origin"] == SITE
