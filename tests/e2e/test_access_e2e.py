"""Keys over real HTTP against the local stack: its admin key, a key created then revoked, beacons."""

from __future__ import annotations

import pytest
import requests

from tests.e2e.stack import LocalStack

pytestmark = pytest.mark.e2e
SITE = "https://site.example"


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


def test_given_a_key_created_over_http_when_revoked_then_it_stops_working(local_stack: LocalStack) -> None:
    created = local_stack.post("/keys", json={"scopes": ["read"], "prefix": "e2e.", "note": "e2e"})
    assert created.status_code == 201, created.text
    key, key_id = created.json()["key"], created.json()["id"]

    assert local_stack.get("/counters/e2e.visits", key=key).status_code == 200
    assert local_stack.get("/counters/other", key=key).status_code == 403
    assert local_stack.post("/events", key=key, json={"counter": "e2e.visits"}).status_code == 403
    assert key not in local_stack.get("/keys").text

    assert local_stack.request("DELETE", f"/keys/{key_id}").status_code == 200
    revoked = local_stack.get("/counters/e2e.visits", key=key)
    assert (
        revoked.status_code == 401
        and revoked.json()["Message"] == "a valid key is needed: send Authorization: Bearer <key>"
    )


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
