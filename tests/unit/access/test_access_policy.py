"""The access decision, key text, name extraction and CORS origin: pure, checked without I/O."""

from __future__ import annotations

import json
import re
import string
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.access import api_keys, gate, policy, tracker
from chalicelib.access.policy import ADMIN, INGEST, READ, TRACKER, KeyRecord
from chalicelib.core.errors import StorageError, ValidationError

ARN = "arn:aws:execute-api:us-east-1:123456789012:abc123/api/GET/counters/blog.x"
names = st.text(alphabet="abcxyz.-", min_size=1, max_size=8)
records = st.builds(
    KeyRecord,
    id=st.just("0123456789abcdef"),
    scopes=st.frozensets(st.sampled_from(policy.SCOPES), min_size=1),
    prefix=st.none() | names,
    origins=st.just(()) | st.lists(st.sampled_from(["https://a.example", "https://b.example"]), min_size=1).map(tuple),
    revoked_ms=st.none() | st.just(1),
    sites=st.just(()) | st.lists(st.sampled_from(["a.example", "*.b.example"]), min_size=1).map(tuple),
    rate_per_second=st.integers(policy.RATE_MIN, policy.RATE_MAX),
)


def brute_force(
    record: KeyRecord | None,
    need: str,
    touched: list[str] | None,
    origin: str | None,
    in_url: bool,
    tracker_route: bool,
) -> bool:
    """The rules as docs/access.md states them, one by one."""
    if record is None or record.revoked_ms is not None:
        return False
    if TRACKER in record.scopes:  # a tracker key: its one route, nothing else
        need = TRACKER if tracker_route else need
        if need != TRACKER:
            return False
    held = set(record.scopes) | ({INGEST, READ} if ADMIN in record.scopes else set())
    if need not in held:
        return False
    if in_url and set(record.scopes) not in ({INGEST}, {TRACKER}):
        return False
    if record.prefix is not None and (touched is None or any(not n.startswith(record.prefix) for n in touched)):
        return False
    return not (record.origins and origin not in record.origins)


@given(
    st.none() | records,
    st.sampled_from(policy.SCOPES),
    st.none() | st.lists(names, max_size=3),
    st.none() | st.sampled_from(["https://a.example", "https://c.example"]),
    st.booleans(),
    st.booleans(),
)
def test_given_any_key_and_request_then_the_decision_matches_the_stated_rules(
    record: KeyRecord | None,
    need: str,
    touched: list[str] | None,
    origin: str | None,
    in_url: bool,
    tracker_route: bool,
) -> None:
    decision = policy.request_decision(record, need, touched, origin, in_url, tracker_route)

    assert decision.allowed == brute_force(record, need, touched, origin, in_url, tracker_route)
    if not decision.allowed:
        unusable = record is None or record.revoked_ms is not None
        assert decision.status == (401 if unusable else 403) and decision.reason


@given(records, st.sampled_from(policy.SCOPES))
def test_given_a_request_within_the_keys_limits_then_the_route_level_check_agrees_with_the_gateway(
    record: KeyRecord, need: str
) -> None:
    gateway = policy.gateway_decision(record, need)
    full = policy.request_decision(record, need, [record.prefix or "x"], record.origins[0] if record.origins else None)

    assert (full.allowed, full.status) == (gateway.allowed, gateway.status)


@given(records)
def test_given_any_key_when_passed_through_the_authorizer_context_then_the_decision_inputs_survive(
    record: KeyRecord,
) -> None:
    context = policy.to_context(record)
    back = policy.from_context(context)

    assert all(isinstance(v, str) for v in context.values())  # API Gateway passes strings only
    assert back is not None
    assert (back.id, back.scopes, back.prefix, back.origins, back.sites, back.rate_per_second) == (
        record.id,
        record.scopes,
        record.prefix,
        record.origins,
        record.sites,
        record.rate_per_second,
    )


def test_given_generated_keys_then_recognisable_random_and_hashed_to_a_public_id() -> None:
    generated = {api_keys.generate() for _ in range(200)}

    assert len(generated) == 200
    assert all(api_keys.is_well_formed(k) and k.startswith("tly_") for k in generated)
    key = generated.pop()
    assert len(key) - len("tly_") == 43  # 32 random bytes, URL-safe base64
    assert (
        re.fullmatch(r"[0-9a-f]{64}", api_keys.digest(key))
        and api_keys.key_id(api_keys.digest(key)) == api_keys.digest(key)[:16]
    )


@pytest.mark.parametrize(
    ("header", "found"),
    [
        ("Bearer {k}", True),
        ("bearer {k}", True),
        ("Bearer  {k} ", True),
        ("{k}", False),
        ("Basic {k}", False),
        ("Bearer tly_short", False),
        ("", False),
        (None, False),
    ],
)
def test_given_an_authorization_header_then_the_key_is_read_only_from_the_bearer_form(
    header: str | None, found: bool
) -> None:
    key = api_keys.generate()

    result = api_keys.from_bearer(header.replace("{k}", key) if header is not None else None)

    assert result == (key if found else None)


def test_given_a_known_key_then_the_authorizer_allows_every_route_with_the_key_in_context_whatever_its_scope() -> None:
    key = api_keys.generate()
    record = KeyRecord("0123456789abcdef", frozenset({READ}), prefix="blog.")

    answers = [gate.authorize({key: record}.get, f"Bearer {key}", ARN, need) for need in (READ, ADMIN, INGEST)]

    for answer in answers:  # the same policy whichever authorizer asked: a cached one fits every route
        (statement,) = answer["policyDocument"]["Statement"]
        assert statement["Effect"] == "Allow"
        assert statement["Resource"] == ["arn:aws:execute-api:us-east-1:123456789012:abc123/api/*/*"]
        assert policy.from_context(answer["context"]) == KeyRecord(record.id, record.scopes, "blog.")
    # The scope is the route-level check's to refuse, from the same context.
    refused = policy.request_decision(policy.from_context(answers[1]["context"]), ADMIN, ["blog.x"], None)
    assert refused.status == 403 and "admin" in refused.reason


# -- the method ARN, split by position ---------------------------------------------------------

# Every character a name may hold (core.validation.NAME_PATTERN), colons included.
NAME_CHARS = string.ascii_letters + string.digits + "_.:-"
any_names = st.text(alphabet=NAME_CHARS, min_size=1, max_size=200)
NAME_ROUTES = (
    ("GET", "counters/{n}"),
    ("GET", "counters/{n}/histogram"),
    ("POST", "hyperloglog/{n}"),
    ("GET", "hyperloglog/{n}"),
    ("GET", "hyperloglog/{n}/histogram"),
    ("POST", "beacon/hyperloglog/{n}"),
)
partitions = st.sampled_from(["aws", "aws-cn", "aws-us-gov"])
regions = st.sampled_from(["us-east-1", "eu-west-3", "cn-north-1", "us-gov-west-1"])


def iam_matches(resource: str, arn: str) -> bool:
    """IAM's wildcards in a Resource: `*` any run of characters, `?` any one character."""
    pattern = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in resource)
    return re.fullmatch(pattern, arn, flags=re.DOTALL) is not None


@given(name=any_names, route=st.sampled_from(NAME_ROUTES), partition=partitions, region=regions)
def test_given_any_valid_name_in_the_path_then_the_method_arn_is_split_by_position(
    name: str, route: tuple[str, str], partition: str, region: str
) -> None:
    method, path = route[0], route[1].replace("{n}", name)
    arn = f"arn:{partition}:execute-api:{region}:123456789012:abc123/api/{method}/{path}"

    parsed = gate.parse_method_arn(arn)
    resource = gate.every_route(arn)

    assert parsed == gate.MethodArn(partition, "execute-api", region, "123456789012", "abc123", "api", method, path)
    assert resource == f"arn:{partition}:execute-api:{region}:123456789012:abc123/api/*/*"
    assert iam_matches(resource, arn)


@given(names=st.lists(any_names, min_size=2, max_size=5), routes=st.lists(st.sampled_from(NAME_ROUTES), min_size=2))
def test_given_a_policy_made_for_one_request_then_it_allows_every_later_route_of_the_key(
    names: list[str], routes: list[tuple[str, str]]
) -> None:
    """What API Gateway's cache does: the answer to the first request decides the later ones."""
    key = api_keys.generate()
    record = KeyRecord("0123456789abcdef", frozenset({ADMIN}))

    def arn(name: str, route: tuple[str, str]) -> str:
        return f"arn:aws:execute-api:us-east-1:123456789012:abc123/api/{route[0]}/{route[1].replace('{n}', name)}"

    cached = gate.authorize({key: record}.get, f"Bearer {key}", arn(names[0], routes[0]), READ)
    (resource,) = cached["policyDocument"]["Statement"][0]["Resource"]

    assert all(iam_matches(resource, arn(name, route)) for name in names for route in routes)
    assert all(iam_matches(resource, f"arn:aws:execute-api:us-east-1:123456789012:abc123/api/{m}/") for m in "GP")
    assert not iam_matches(resource, "arn:aws:execute-api:us-east-1:123456789012:other1/api/GET/counters/a")
    assert not iam_matches(resource, "arn:aws:execute-api:us-east-1:123456789012:abc123/prod/GET/counters/a")


@pytest.mark.parametrize(
    "arn",
    [
        "",
        "not an arn",
        "arn:aws:execute-api:us-east-1:123456789012",
        "arn:aws:execute-api:us-east-1::abc123/api/GET/x",
        "arn:aws:execute-api:us-east-1:123456789012:abc123",
        "arn:aws:execute-api:us-east-1:123456789012:abc123/api",
        "urn:aws:execute-api:us-east-1:123456789012:abc123/api/GET/x",
    ],
)
def test_given_something_that_is_not_a_method_arn_then_the_authorizer_fails_instead_of_guessing(arn: str) -> None:
    key = api_keys.generate()
    record = KeyRecord("0123456789abcdef", frozenset({READ}))

    with pytest.raises(gate.MalformedArn):
        gate.authorize({key: record}.get, f"Bearer {key}", arn, READ)


@pytest.mark.parametrize("token", [None, "", "Bearer tly_x", "Bearer " + "tly_" + "a" * 43])
def test_given_no_or_an_unknown_key_then_the_authorizer_raises_lambdas_unauthorized(token: str | None) -> None:
    with pytest.raises(gate.Unauthorized, match=r"^Unauthorized$"):
        gate.authorize(lambda key: None, token, ARN, READ)


def test_given_a_revoked_key_then_the_authorizer_raises_unauthorized() -> None:
    key = api_keys.generate()
    record = KeyRecord("0123456789abcdef", frozenset({ADMIN}), revoked_ms=5)

    with pytest.raises(gate.Unauthorized):
        gate.authorize({key: record}.get, f"Bearer {key}", ARN, READ)


def body(value: Any) -> bytes:
    return json.dumps(value).encode()


@pytest.mark.parametrize(
    ("names", "path", "query", "raw", "expected"),
    [
        (policy.Names(path="counter"), {"counter": "a"}, {}, None, ("a",)),
        (policy.Names(query="names", sep=","), {}, {"names": "a, b"}, None, ("a", "b")),
        (policy.Names(query="url"), {}, {}, None, ()),
        (policy.Names(body="counter", batch="events"), {}, {}, body({"counter": "a"}), ("a",)),
        (
            policy.Names(body="counter", batch="events"),
            {},
            {},
            body({"events": [{"counter": "a"}, {"counter": "b"}]}),
            ("a", "b"),
        ),
        (policy.Names(body="counter", batch="events"), {}, {}, body({"events": [{"counter": 1}]}), None),
        (policy.Names(body="counter", batch="events"), {}, {}, body({"events": "x"}), None),
        (policy.Names(body="counter", batch="events"), {}, {}, b"[" * 100_000, None),
        (policy.Names(body="counter", batch="events"), {}, {}, b"not json", None),
        (policy.EVERY_NAME, {"counter": "a"}, {}, None, None),
    ],
)
def test_given_a_request_then_the_names_it_touches_are_found_or_declared_unclear(
    names: policy.Names, path: dict[str, str], query: dict[str, str], raw: bytes | None, expected: Any
) -> None:
    assert names.extract(path, query, raw) == expected


@pytest.mark.parametrize(
    ("origin", "stage", "scope", "key_origins", "expected"),
    [
        (None, ("*",), READ, (), None),
        ("https://a.example", ("*",), READ, (), "https://a.example"),
        ("https://a.example", ("https://a.example",), ADMIN, (), "https://a.example"),
        ("https://c.example", ("https://a.example",), READ, (), None),
        ("https://c.example", (), INGEST, (), "https://c.example"),
        ("https://c.example", (), INGEST, ("https://a.example",), None),
        ("https://a.example", (), INGEST, ("https://a.example",), "https://a.example"),
        ("https://c.example", (), None, (), None),
    ],
)
def test_given_an_origin_then_cors_answers_it_only_where_allowed(
    origin: str | None, stage: tuple[str, ...], scope: str | None, key_origins: tuple[str, ...], expected: str | None
) -> None:
    record = KeyRecord("0123456789abcdef", frozenset({INGEST}), origins=key_origins) if key_origins else None

    assert policy.cors_origin(origin, stage, scope, record) == expected


def test_given_a_new_key_request_then_validated_with_defaults() -> None:
    new = policy.parse_new_key({"scopes": ["ingest"], "origins": ["https://a.example", "https://a.example"]})

    assert new == policy.NewKey(
        frozenset({INGEST}), None, ("https://a.example",), "", rate_per_second=policy.DEFAULT_RATES[INGEST]
    )
    with pytest.raises(ValidationError, match="origins limit ingest keys only"):
        policy.parse_new_key({"scopes": ["ingest", "read"], "origins": ["https://a.example"]})
    with pytest.raises(ValidationError, match="prefix"):
        policy.parse_new_key({"scopes": ["read"], "prefix": "a\nb"})


def test_given_the_key_store_failing_when_a_beacon_arrives_then_503_in_chalices_shape() -> None:
    def failing(key: str) -> KeyRecord | None:
        raise StorageError("down")

    access = policy.ROUTES[("POST", "/beacon/views")]

    outcome = gate.check_request(
        access, {}, {"key": api_keys.generate()}, b"{}", None, None, failing, (), 0, lambda record, now_ms: True
    )

    assert (outcome.decision.allowed, outcome.decision.status) == (False, 503)
    assert gate.error_body(outcome.decision)["Code"] == "ServiceUnavailable"


@pytest.mark.parametrize(
    ("sites", "host", "matches"),
    [
        (("blog.example",), "blog.example", True),
        (("blog.example",), "www.blog.example", True),
        (("blog.example",), "sub.blog.example", False),
        (("blog.example",), "www.www.blog.example", False),
        (("blog.example",), "blog.example.evil", False),
        (("blog.example",), "xblog.example", False),
        (("*.blog.example",), "a.b.blog.example", True),
        (("*.blog.example",), "blog.example", False),
        (("*.blog.example",), "xblog.example", False),
    ],
)
def test_given_a_tracker_keys_sites_then_a_host_matches_as_docs_access_states(
    sites: tuple[str, ...], host: str, matches: bool
) -> None:
    assert tracker.site_matches(sites, host) == matches


def test_given_new_tracker_sites_then_a_leading_www_is_dropped_and_duplicates_kept_once() -> None:
    assert tracker.parse_sites(["www.blog.example", "blog.example", "*.www.x.example"]) == (
        "blog.example",
        "*.www.x.example",
    )
