"""The OpenAPI 3.1 document, assembled from routes.OPERATIONS. Pure. docs/api.md, "The contract"."""

from __future__ import annotations

import functools
from typing import Any

from chalicelib.access import policy
from chalicelib.contract import routes, schemas
from chalicelib.contract.routes import Operation

BEARER = "bearerKey"
BEACON = "beaconKey"
ERRORS: dict[int, tuple[str, str]] = {
    400: ("BadRequest", "bad input, refused whole before any write (Code BadRequestError)"),
    401: ("Unauthorized", "no key, an unknown key or a revoked key (Code UnauthorizedError)"),
    403: (
        "Forbidden",
        "a key without this route's scope, name prefix or origin, or a tracker key's page view of another "
        "site or from another origin (Code ForbiddenError)",
    ),
    404: ("NotFound", "nothing of that name (Code NotFoundError)"),
    414: (
        "UriTooLong",
        "the URL is longer than the gateway takes (API Gateway's DEFAULT_4XX, Code BadRequestError; "
        "locally past 64 KiB)",
    ),
    429: (
        "Throttled",
        "the key is over its rate_per_second (a Retry-After header says when to retry), or API Gateway "
        "throttled the stage on AWS: retry later (Code TooManyRequestsError)",
    ),
    503: (
        "Unavailable",
        "storage or the key check failed after retries: retry the request (Code ServiceUnavailable, "
        "or PartialWrite with `stored` and `failed` ids)",
    ),
}
DESCRIPTION = """Tally counts events, views and distinct items, and answers windowed counts.

Keys travel as `Authorization: Bearer <key>`; each route needs a scope (ingest, read or admin;
an admin key may do everything), and a key may be limited to a name prefix. Beacon routes take
an ingest-only key as `?key=`; `POST /beacon/pageview` also takes a tracker key, which counts page
views of its own sites only. Every key has a request rate (429 with Retry-After over it). Times go in as epoch milliseconds or ISO-8601 with a zone and come
back as ISO-8601 UTC. Bodies are parsed as JSON whatever their content type. Every error is
JSON in Chalice's shape `{"Code", "Message"}`; an unknown path or a method a path does not have
answers 404 `NotFoundError`. Every path also answers a CORS preflight (OPTIONS)."""


def operation_object(operation: Operation) -> dict[str, Any]:
    access = policy.ROUTES[operation.key]
    security = [{BEACON: []}] if access.beacon else [] if access.scope is None else [{BEARER: [access.scope]}]
    statuses = set(operation.errors) | {414, 429, 503} | ({400} if operation.params or operation.body else set())
    if security:
        statuses |= {401, 403}
    errors = {str(status): {"$ref": f"#/components/responses/{ERRORS[status][0]}"} for status in sorted(statuses)}
    answer: dict[str, Any] = {
        "operationId": operation.operation_id,
        "tags": operation.tags,
        "summary": operation.summary,
        "security": security,
        "responses": {**{str(a.status): _answer(a, operation) for a in operation.answers}, **errors},
    }
    if operation.description:
        answer["description"] = operation.description
    if operation.params:
        answer["parameters"] = [_parameter(p) for p in operation.params]
    if operation.body is not None:
        answer["requestBody"] = {"required": True, "content": {routes.JSON: {"schema": operation.body}}}
    return answer


def _answer(answer: routes.Answer, operation: Operation) -> dict[str, Any]:
    result: dict[str, Any] = {"description": answer.description}
    if answer.schema is not None:
        result["content"] = {
            media: {"schema": answer.schema if media == routes.JSON or i == 0 else schemas.string()}
            for i, media in enumerate(answer.media)
        }
    if answer.headers:
        result["headers"] = {name: {"schema": schemas.string()} for name in answer.headers}
    if operation.links and answer is operation.answers[0]:
        result["links"] = {
            link.name: {
                "operationId": link.operation_id,
                "parameters": link.parameters,
                **({"description": link.description} if link.description else {}),
            }
            for link in operation.links
        }
    return result


def _parameter(param: routes.Param) -> dict[str, Any]:
    result: dict[str, Any] = {"name": param.name, "in": param.where, "schema": param.schema}
    if param.schema.get("type") == "object":  # its properties are the query parameters (OpenAPI's form style)
        result.update(style="form", explode=True)
    if param.required:
        result["required"] = True
    if param.description:
        result["description"] = param.description
    return result


def build() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for operation in routes.OPERATIONS:
        method, path = operation.key
        paths.setdefault(path, {})[method.lower()] = operation_object(operation)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Tally", "version": "1", "description": DESCRIPTION},
        "paths": dict(sorted(paths.items())),
        "components": {
            "schemas": dict(schemas.COMPONENTS),
            "responses": {
                name: {"description": text, "content": {routes.JSON: {"schema": schemas.ref("Error")}}}
                for name, text in ERRORS.values()
            },
            "securitySchemes": {
                BEARER: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "a Tally key (`tly_...`); the scope an operation lists is the one it "
                    "needs (ingest, read or admin; admin implies the others)",
                },
                BEACON: {
                    "type": "apiKey",
                    "in": "query",
                    "name": "key",
                    "description": "an ingest-only key, for navigator.sendBeacon (which cannot set headers); "
                    "POST /beacon/pageview also takes a tracker key",
                },
            },
        },
    }


document = functools.cache(build)  # what GET /openapi.json answers, built once per process
