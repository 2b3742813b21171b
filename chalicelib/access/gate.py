"""The access checks wired into the API: the gateway authorizer's answer, the route-level check and
the CORS headers. No I/O of its own: key lookups and the rate count are passed in. docs/access.md,
"How it is enforced" and "Browsers"."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chalicelib.access import api_keys, policy, rates, tracker
from chalicelib.core.errors import StorageError

FindKey = Callable[[str], policy.KeyRecord | None]
# Counts one request of a key against its rate: False when the key is over it (access/rates.py).
Admit = Callable[[policy.KeyRecord, int], bool]  # the key, the request's time (epoch ms)
KEY_CHECK_FAILED = policy.Decision(False, 503, "the key could not be checked: retry later")
RATE_CHECK_FAILED = policy.Decision(False, 503, "the key's request rate could not be checked: retry later")


class Unauthorized(Exception):
    """Raised as `Unauthorized("Unauthorized")`: what makes API Gateway answer 401 (AWS's documented contract)."""


def authorize(find_key: FindKey, token: str | None, method_arn: str, need: str) -> dict[str, Any]:
    """A token authorizer's answer: Unauthorized (401) for no usable key, else a policy allowing every
    route of the stage (docs/access.md, "How it is enforced"); `check_request` refuses the rest (403)."""
    key = api_keys.from_bearer(token)
    record = find_key(key) if key is not None else None
    if policy.gateway_decision(record, need).status == 401:
        raise Unauthorized("Unauthorized")
    assert record is not None
    return {
        "principalId": record.id,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [{"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": [every_route(method_arn)]}],
        },
        "context": policy.to_context(record),
    }


@dataclass(frozen=True)
class MethodArn:
    """A token authorizer's `methodArn`, split by position (docs/guarantees.md, "The authorizer's method ARN")."""

    partition: str
    service: str
    region: str
    account: str
    api_id: str
    stage: str
    method: str
    path: str


class MalformedArn(ValueError):
    """Not a method ARN: the authorizer fails (a 503 answer) rather than guess a policy the gateway caches."""


def parse_method_arn(method_arn: str) -> MethodArn:
    parts = method_arn.split(":", 5)
    if len(parts) == 6 and parts[0] == "arn" and all(parts[1:5]):
        _, partition, service, region, account, rest = parts
        api_id, stage, method, path = (rest.split("/", 3) + ["", "", ""])[:4]
        if api_id and stage and method:
            return MethodArn(partition, service, region, account, api_id, stage, method, path)
    raise MalformedArn(f"not an execute-api method ARN: {method_arn[:200]!r}")


def every_route(method_arn: str) -> str:
    """`...:<api>/<stage>/GET/a:b` -> `...:<api>/<stage>/*/*` (docs/guarantees.md, "The authorizer's cached policy")."""
    arn = parse_method_arn(method_arn)
    return f"arn:{arn.partition}:{arn.service}:{arn.region}:{arn.account}:{arn.api_id}/{arn.stage}/*/*"


@dataclass(frozen=True)
class Outcome:
    decision: policy.Decision
    allow_origin: str | None
    retry_after: int | None = None  # seconds, for a key over its rate (429)

    def cors_headers(self) -> dict[str, str]:
        allowed = {} if self.allow_origin is None else {"Access-Control-Allow-Origin": self.allow_origin}
        return {**allowed, "Vary": "Origin"}

    def refusal_headers(self) -> dict[str, str | list[str]]:
        """Headers of the refusal answer besides CORS: Retry-After for a key over its rate."""
        return {} if self.retry_after is None else {"Retry-After": str(self.retry_after)}


def check_request(
    access: policy.RouteAccess,
    path_params: Mapping[str, str],
    query: Mapping[str, str],
    body: str | bytes | None,
    origin: str | None,
    gateway_context: Mapping[str, Any] | None,
    find_key: FindKey,
    stage_origins: Sequence[str],
    now_ms: int,
    admit: Admit,
) -> Outcome:
    """The route-level decision for one request, and the origin CORS may answer. A request the
    key may make is then counted against the key's rate (`admit`, at most one write): over it, 429."""
    if access.scope is None:
        return Outcome(policy.ALLOWED, policy.cors_origin(origin, stage_origins, None, None))
    if access.beacon:
        key = query.get("key")
        try:
            record = find_key(key) if key is not None and api_keys.is_well_formed(key) else None
        except StorageError:
            return Outcome(KEY_CHECK_FAILED, policy.cors_origin(origin, stage_origins, access.scope, None))
    else:
        record = policy.from_context(gateway_context)
    names = access.names.extract(path_params, query, body) if record is not None and record.prefix else ()
    decision = policy.request_decision(
        record, access.scope, names, origin, key_in_url=access.beacon, tracker_route=access.tracker
    )
    allow_origin = policy.cors_origin(origin, stage_origins, access.scope, record)
    if not decision.allowed or record is None:
        return Outcome(decision, allow_origin)
    refusal = tracker.check_pageview(record.sites, body, origin, now_ms) if record.is_tracker else None
    if refusal is not None:
        return Outcome(policy.Decision(False, *refusal), allow_origin)
    try:
        admitted = admit(record, now_ms)
    except StorageError:
        return Outcome(RATE_CHECK_FAILED, allow_origin)
    if admitted:
        return Outcome(decision, allow_origin)
    over = f"this key is over its {record.rate_per_second} requests a second: retry later"
    return Outcome(policy.Decision(False, 429, over), allow_origin, rates.RETRY_AFTER_SECONDS)


def error_body(decision: policy.Decision) -> dict[str, str]:
    """Chalice's error shape for a denial."""
    codes = {
        400: "BadRequestError",
        401: "UnauthorizedError",
        403: "ForbiddenError",
        429: "TooManyRequestsError",
        503: "ServiceUnavailable",
    }
    return {"Code": codes[decision.status], "Message": decision.reason}


def preflight_headers(
    origin: str | None, stage_origins: Sequence[str], route: str, authorizers: Mapping[str, str | None]
) -> dict[str, str] | None:
    """The answer to a browser's preflight (OPTIONS) for a route, whose methods are guarded by
    `authorizers` (method -> authorizer name or None); None when the origin may not call it."""
    scopes = {policy.route_access(method, route, name).scope for method, name in authorizers.items()}
    allow = policy.cors_origin(origin, stage_origins, policy.INGEST if policy.INGEST in scopes else None, None)
    if allow is None:
        return None
    return {
        "Access-Control-Allow-Origin": allow,
        "Vary": "Origin",
        "Access-Control-Allow-Methods": ", ".join(sorted(authorizers) + ["OPTIONS"]),
        "Access-Control-Allow-Headers": "Authorization, Content-Type",
        "Access-Control-Max-Age": "600",
    }
