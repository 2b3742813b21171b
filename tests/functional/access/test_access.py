"""Access over HTTP: every route app.py declares against every kind of key, CORS, key storage."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from chalicelib.access import api_keys, policy
from chalicelib.core import keyspace
from chalicelib.core.settings import Settings
from tests.conftest import create_key
from tests.functional.helpers import partition
from tools import gateway

# An hour ago: a view is accepted only within the views horizon of now (the real clock here).
T = int(time.time() * 1000) - 3_600_000
INSIDE, OUTSIDE = "blog.post-1", "shop.item-1"
SITE, ELSEWHERE = "https://site.example", "https://elsewhere.example"
# What to send to each route, `{n}` standing for the name it touches. A route without an
# entry here is still checked, sent without query or body.
SAMPLES: dict[tuple[str, str], tuple[dict[str, str], Any]] = {
    ("POST", "/events"): ({}, {"counter": "{n}"}),
    ("POST", "/beacon/events"): ({}, {"events": [{"counter": "{n}"}]}),
    ("POST", "/views"): ({}, {"url": "{n}", "time": T, "clientId": "c-1"}),
    ("POST", "/beacon/views"): ({}, {"url": "{n}", "time": T, "clientId": "c-1"}),
    ("POST", "/hyperloglog/{name}"): ({}, {"data": "visitor-1"}),
    ("POST", "/beacon/hyperloglog/{name}"): ({}, {"data": "visitor-1"}),
    ("GET", "/hyperloglog"): ({"names": "{n}"}, None),
    ("GET", "/views"): ({"url": "{n}"}, None),
    ("GET", "/views/top"): ({"prefix": "{n}"}, None),
    ("POST", "/keys"): ({}, {"scopes": ["read"]}),
}


def routes(app: Any) -> list[tuple[str, str]]:
    return sorted((method, path) for path, entries in app.routes.items() for method in entries if method != "OPTIONS")


def access_of(app: Any, method: str, path: str) -> policy.RouteAccess:
    entry = app.routes[path][method]
    return policy.route_access(method, path, entry.authorizer.name if entry.authorizer else None)


def send(
    client: Any, method: str, path: str, name: str, key: str | None, beacon: bool, origin: str | None = None
) -> Any:
    query, body = SAMPLES.get((method, path), ({}, None))
    query = {k: v.replace("{n}", name) for k, v in query.items()}
    concrete = path
    for param in ("counter", "name", "site", "report_id", "key_id"):
        concrete = concrete.replace("{%s}" % param, {"report_id": "x", "key_id": "0123456789abcdef"}.get(param, name))
    if beacon and key is not None:
        query["key"] = key
    if query:
        concrete += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    headers = {"Content-Type": "text/plain" if beacon else "application/json"}
    if origin:
        headers["Origin"] = origin
    raw = json.dumps(body).replace("{n}", name).encode() if body is not None else b""
    http = client.http.with_key(None if beacon else key)
    return http.request(method, concrete, headers=headers, body=raw)


def test_given_every_route_app_declares_then_each_has_a_decision_and_its_authorizer_agrees(app_module: Any) -> None:
    app = app_module.app
    undecided = [f"{method} {path}" for method, path in routes(app) if (method, path) not in policy.ROUTES]
    disagreeing = [
        f"{method} {path}: app.py enforces {access_of(app, method, path).scope}, ROUTES says {decided.scope}"
        for method, path in routes(app)
        if (decided := policy.ROUTES.get((method, path))) and access_of(app, method, path).scope != decided.scope
    ]
    assert undecided == [], "add each to chalicelib/access/policy.py ROUTES (and docs/access.md)"
    assert disagreeing == []


def test_given_every_route_when_called_with_each_kind_of_key_then_the_expected_status(
    client: Any, aws: Any, app_module: Any
) -> None:
    app = app_module.app
    other_scopes = {policy.INGEST: ["read"], policy.READ: ["ingest"], policy.ADMIN: ["ingest", "read"]}
    revoked = create_key(aws, ["admin"])
    assert client.http.delete(f"/keys/{api_keys.key_id(api_keys.digest(revoked))}").status_code == 200
    failures, checked = [], 0
    for method, path in routes(app):
        access = access_of(app, method, path)
        if access.scope is None:
            continue
        beacon = access.beacon
        right_scopes = ["ingest"] if access.scope == policy.INGEST else [access.scope]
        right = create_key(aws, right_scopes)
        prefixed = create_key(aws, right_scopes, prefix="blog.")
        cases: list[tuple[str, str | None, str, str | None, set[int] | None]] = [
            # (case, key, name, origin, expected statuses; None: allowed, i.e. not 401/403/5xx)
            ("no key", None, INSIDE, None, {401}),
            ("malformed key", "tly_not-a-key", INSIDE, None, {401}),
            ("unknown key", api_keys.generate(), INSIDE, None, {401}),
            ("revoked key", revoked, INSIDE, None, {401}),
            ("wrong scope", create_key(aws, other_scopes[access.scope]), INSIDE, None, {403}),
            ("wrong prefix", prefixed, OUTSIDE, None, {403}),
            ("prefix key, name inside", prefixed, INSIDE, None, {403} if access.names.every else None),
            ("right key", right, INSIDE, None, None),
        ]
        if access.scope == policy.INGEST:
            limited = create_key(aws, ["ingest"], origins=[SITE])
            cases += [
                ("wrong origin", limited, INSIDE, ELSEWHERE, {403}),
                ("right origin", limited, INSIDE, SITE, None),
            ]
        if not beacon:
            cases.append(("admin key", create_key(aws, ["admin"]), INSIDE, None, None))
        else:
            cases.append(("admin key in the URL", create_key(aws, ["admin"]), INSIDE, None, {403}))
        for case, key, name, origin, expected in cases:
            response = send(client, method, path, name, key, beacon, origin)
            status = response.status_code
            ok = status in expected if expected else status not in (401, 403) and status < 500
            shaped = set(json.loads(response.body or b"{}")) == {"Code", "Message"} if status >= 400 else True
            checked += 1
            if not ok or not shaped:
                failures.append(f"{method} {path} {case}: {status} {response.body[:200]!r}")
    assert failures == []
    guarded = [route for route in routes(app) if access_of(app, *route).scope is not None]
    assert checked >= 9 * len(guarded)  # every guarded route got every case


def key_cache_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    """Move the local gateway's authorizer cache past every TTL (tools/gateway.py)."""
    later = gateway.cache_clock() + 3601
    monkeypatch.setattr(gateway, "cache_clock", lambda: later)


def test_given_a_key_created_over_http_then_shown_once_listed_without_secret_and_revocable(
    client: Any, aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    created = client.http.post(
        "/keys", body=json.dumps({"scopes": ["read"], "prefix": "blog.", "note": "blog widget"}).encode()
    )
    assert created.status_code == 201
    body = json.loads(created.body)
    key = body["key"]
    assert api_keys.is_well_formed(key) and body["scopes"] == ["read"] and body["prefix"] == "blog."
    reader = client.http.with_key(key)
    assert reader.get("/counters/blog.a").status_code == 200

    listed = json.loads(client.http.get("/keys").body)["keys"]
    assert body["id"] in [k["id"] for k in listed]
    assert key not in json.dumps(listed) and api_keys.digest(key) not in json.dumps(listed)

    assert client.http.delete(f"/keys/{body['id']}").status_code == 200
    # API Gateway keeps the key's cached answer for KEY_CACHE_SECONDS (the local gateway too).
    assert reader.get("/counters/blog.b").status_code == 200
    key_cache_expires(monkeypatch)
    assert reader.get("/counters/blog.a").status_code == 401
    assert client.http.delete("/keys/ffffffffffffffff").status_code == 404
    assert client.http.delete("/keys/not-an-id").status_code == 400


# Names holding every kind of character a name may (core.validation.NAME_PATTERN).
PUNCTUATED = ["site:b", "a:b", "blog.post-1_x:2026", ":", "a::b:", "-._:"]


def test_given_names_with_colons_dots_dashes_and_underscores_then_every_route_answers_and_the_keys_stay_valid(
    client: Any, aws: Any
) -> None:
    """Through the local gateway, which caches each key's first answer as API Gateway does:
    the policy made for a request to `/counters/a:b` must let the key through everywhere."""
    reader, writer = create_key(aws, ["read"]), create_key(aws, ["ingest"])
    as_reader, as_writer = client.http.with_key(reader), client.http.with_key(writer)
    beacon = {"Content-Type": "text/plain"}
    failures = []
    for name in PUNCTUATED:
        answers = {
            "POST /events": as_writer.post("/events", body=body({"counter": name})),
            "POST /hyperloglog": as_writer.post(f"/hyperloglog/{name}", body=body({"data": "v-1"})),
            "POST /beacon/events": client.http.with_key(None).post(
                f"/beacon/events?key={writer}", headers=beacon, body=body({"events": [{"counter": name}]})
            ),
            "POST /beacon/hyperloglog": client.http.with_key(None).post(
                f"/beacon/hyperloglog/{name}?key={writer}", headers=beacon, body=body({"data": "v-2"})
            ),
            "GET /counters": as_reader.get(f"/counters/{name}"),
            "GET /counters/histogram": as_reader.get(f"/counters/{name}/histogram"),
            "GET /hyperloglog": as_reader.get(f"/hyperloglog/{name}"),
            "GET /hyperloglog/histogram": as_reader.get(f"/hyperloglog/{name}/histogram"),
            "GET /hyperloglog?names": as_reader.get(f"/hyperloglog?names={name},x"),
        }
        failures += [
            f"{route} {name!r}: {r.status_code} {r.body[:200]!r}"
            for route, r in answers.items()
            if r.status_code >= 300
        ]
    # Afterwards, routes the keys have not called yet still take them.
    later = {
        "GET /reports": as_reader.get("/reports"),
        "GET /counters (listing)": as_reader.get("/counters"),
        "POST /views": as_writer.post(
            "/views", body=body({"url": "https://a.example/x:y", "time": T, "clientId": "c"})
        ),
    }
    failures += [f"{route}: {r.status_code} {r.body[:200]!r}" for route, r in later.items() if r.status_code >= 300]

    assert failures == []


def test_given_api_gateways_token_event_for_a_name_with_colons_then_each_authorizer_allows_the_whole_stage(
    app_module: Any, aws: Any
) -> None:
    """The authorizers alone, called as API Gateway calls them (TOKEN input, methodArn)."""
    key = create_key(aws, ["read"])
    stage_arn = "arn:aws:execute-api:eu-west-3:123456789012:abc123/api"
    authorizers = (app_module.ingest_key, app_module.read_key, app_module.admin_key)
    answers = []
    for name in PUNCTUATED:
        for method, path in (("GET", f"counters/{name}/histogram"), ("POST", f"hyperloglog/{name}")):
            event = {
                "type": "TOKEN",
                "authorizationToken": f"Bearer {key}",
                "methodArn": f"{stage_arn}/{method}/{path}",
            }
            answers += [authorizer(event, None) for authorizer in authorizers]

    statements = [statement for answer in answers for statement in answer["policyDocument"]["Statement"]]
    assert {(s["Effect"], tuple(s["Resource"])) for s in statements} == {("Allow", (f"{stage_arn}/*/*",))}
    assert {answer["context"]["scopes"] for answer in answers} == {"read"}


def test_given_a_key_refused_on_one_route_for_its_scope_then_it_still_works_on_its_own_routes(
    client: Any, aws: Any
) -> None:
    """A refusal is the route's answer, never a cached gateway policy."""
    reader = client.http.with_key(create_key(aws, ["read"]))

    refused = reader.post("/events", body=body({"counter": "a:b"}))

    assert (
        refused.status_code == 403 and json.loads(refused.body)["Message"] == "this key does not have the ingest scope"
    )
    assert reader.get("/counters/a:b").status_code == 200
    assert reader.get("/hyperloglog/a:b").status_code == 200


def body(value: Any) -> bytes:
    return json.dumps(value).encode()


@pytest.mark.parametrize(
    "body",
    [
        {"scopes": []},
        {"scopes": ["root"]},
        {"scopes": ["read"], "origins": [SITE]},
        {"scopes": ["ingest"], "origins": ["javascript:alert(1)"]},
        {"scopes": ["read"], "prefix": ""},
        {"scopes": ["read"], "prefix": "a\u0007"},
        {"scopes": ["read"], "prefix": "a\u0085"},
        {"scopes": ["read"], "extra": 1},
        ["read"],
    ],
)
def test_given_a_bad_key_request_when_posted_then_400_and_no_key_stored(client: Any, aws: Any, body: Any) -> None:
    before = len(json.loads(client.http.get("/keys").body)["keys"])

    response = client.http.post("/keys", body=json.dumps(body).encode())

    assert response.status_code == 400 and json.loads(response.body)["Code"] == "BadRequestError"
    assert len(json.loads(client.http.get("/keys").body)["keys"]) == before


@pytest.mark.parametrize("prefix", ["site:", "\U000e3699 ", "a b", "\u00e9t\u00e9"])
def test_given_a_prefix_without_control_characters_when_posted_then_the_key_is_made(client: Any, prefix: str) -> None:
    # Any text but control characters, unassigned code points included: what the document states.
    response = client.http.post("/keys", body=json.dumps({"scopes": ["read"], "prefix": prefix}).encode())

    assert response.status_code == 201, response.body
    assert json.loads(response.body)["prefix"] == prefix


def test_given_keys_stored_when_the_table_is_read_then_it_holds_hashes_never_a_plain_key(client: Any, aws: Any) -> None:
    plain = [client.admin_key, create_key(aws, ["ingest"], origins=[SITE])]
    plain.append(json.loads(client.http.post("/keys", body=b'{"scopes": ["read"]}').body)["key"])

    items = partition(aws.dynamodb, keyspace.ACCESS_KEY)

    stored = json.dumps(items)
    assert len(items) == 3
    assert {item["sk"]["S"] for item in items} == {api_keys.digest(key) for key in plain}
    assert not any(key in stored or key[len(api_keys.KEY_PREFIX) :] in stored for key in plain)


# -- browsers ----------------------------------------------------------------------------------


@pytest.fixture
def allowed_origin(app_module: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(app_module, "settings", Settings.from_env({"CORS_ORIGINS": SITE}))
    return SITE


def test_given_a_preflight_then_answered_for_allowed_origins_on_every_route_and_any_origin_on_ingest_routes(
    client: Any, allowed_origin: str
) -> None:
    asked = {"Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "authorization"}
    read = client.http.with_key(None).options("/counters/a", headers={"Origin": allowed_origin, **asked})
    denied = client.http.with_key(None).options("/counters/a", headers={"Origin": ELSEWHERE, **asked})
    ingest = client.http.with_key(None).options("/events", headers={"Origin": ELSEWHERE, **asked})

    assert read.status_code == 204
    assert read.headers["Access-Control-Allow-Origin"] == allowed_origin
    assert "Authorization" in read.headers["Access-Control-Allow-Headers"]
    assert "GET" in read.headers["Access-Control-Allow-Methods"]
    assert denied.status_code == 403 and "Access-Control-Allow-Origin" not in denied.headers
    assert ingest.status_code == 204 and ingest.headers["Access-Control-Allow-Origin"] == ELSEWHERE


@pytest.mark.parametrize(
    ("what", "key", "path", "status"),
    [
        ("answer", "admin", "/counters/a", 200),
        ("app error", "admin", "/counters/bad%20name", 400),
        ("no key (gateway)", None, "/counters/a", 401),
        ("wrong scope (route)", "ingest", "/counters/a", 403),
        ("wrong prefix (route)", "prefixed", "/counters/a", 403),
        ("unknown path (gateway)", "admin", "/no/such/path", 404),
    ],
)
def test_given_an_allowed_origin_then_every_answer_carries_cors_and_a_disallowed_one_only_gateway_answers(
    client: Any, aws: Any, allowed_origin: str, what: str, key: str | None, path: str, status: int
) -> None:
    plain = {"admin": client.admin_key, "ingest": create_key(aws, ["ingest"]), None: None}
    plain["prefixed"] = create_key(aws, ["read"], prefix="b")
    http = client.http.with_key(plain[key])

    allowed = http.get(path, headers={"Origin": allowed_origin})
    other = http.get(path, headers={"Origin": ELSEWHERE})

    assert allowed.status_code == other.status_code == status, what
    assert allowed.headers["Access-Control-Allow-Origin"] == allowed_origin
    if status >= 400:
        assert set(json.loads(allowed.body)) == {"Code", "Message"}
    # API Gateway's own answers echo any Origin (they carry no data); the app's answers only
    # name allowed origins.
    assert ("Access-Control-Allow-Origin" in other.headers) == ("gateway" in what)


def test_given_a_beacon_body_as_text_plain_with_an_ingest_key_in_the_url_then_accepted(client: Any, aws: Any) -> None:
    key = create_key(aws, ["ingest"], origins=[SITE])
    body = json.dumps({"url": "https://site.example/a", "time": T, "clientId": "c-1"}).encode()
    headers = {"Content-Type": "text/plain;charset=UTF-8", "Origin": SITE}

    response = client.http.with_key(None).post(f"/beacon/views?key={key}", headers=headers, body=body)

    assert response.status_code == 202, response.body
    assert response.headers["Access-Control-Allow-Origin"] == SITE


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE", "HEAD", "TRACE", "POST"])
def test_given_a_method_a_path_does_not_have_then_404_as_api_gateway_answers_with_cors(
    client: Any, allowed_origin: str, method: str
) -> None:
    response = client.http.request(method, "/counters/a", headers={"Origin": allowed_origin})

    # API Gateway's MISSING_AUTHENTICATION_TOKEN, as tools/gateway.py defines it: the app never runs.
    assert response.status_code == 404, response.body
    assert json.loads(response.body) == {"Code": "NotFoundError", "Message": "no such route"}
    assert response.headers["Access-Control-Allow-Origin"] == allowed_origin


def test_given_the_key_store_unreachable_when_a_key_is_checked_then_503_in_chalices_shape(
    client: Any, app_module: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chalicelib.core.errors import StorageError

    def unreachable(key: str) -> None:
        raise StorageError("could not read the key")

    monkeypatch.setattr(app_module, "find_key", unreachable)

    response = client.http.get("/counters/a")

    assert response.status_code == 503
    assert json.loads(response.body)["Code"] == "ServiceUnavailable"
