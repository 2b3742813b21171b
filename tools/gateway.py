"""API Gateway's own answers (gateway responses), defined once for every path.

API Gateway answers some requests without calling the app: no key (401), a key the
authorizer denies (403), a path or method the API does not have (by default a confusing 403
"Missing Authentication Token"), throttling (429), a failing authorizer. Tally makes each of
these a JSON body in Chalice's error shape with CORS headers, so a browser can read it:

- on AWS, `tools.provision` puts them on the REST API after `chalice deploy` and
  `tools.cfn_template` adds them to the template (`x-amazon-apigateway-gateway-responses`);
- locally, `install()` makes Chalice's local gateway (`make run`, the tests' Client) answer
  the same way, from the same table, for every HTTP method (a method a path does not have,
  TRACE included, is API Gateway's MISSING_AUTHENTICATION_TOKEN: a JSON 404).

The CORS header echoes the request's Origin (`method.request.header.Origin`): a gateway
response carries no data, only why the request was refused.

Locally, `install()` also makes Chalice's local gateway cache each authorizer answer as API
Gateway does (Chalice's calls the authorizer on every request): for the authorizer's
`ttl_seconds` (KEY_CACHE_SECONDS), keyed by the token, and the cached policy is applied to the
key's later requests, whatever their route. AWS documents that the cached policy is applied
to additional requests within the TTL, not whether two authorizers share a cache, so the
local cache is shared by all of them: the strictest reading (docs/guarantees.md).

Locally, `mounted_handler()` serves the API under a base path as API Gateway does: under the
stage's name on the `execute-api` URL (`/api/...`), at the root or under a base path mapping on
a custom domain. A request outside it never reaches the API and gets API Gateway's own answer
for a stage it does not have, which no gateway response of the API changes (docs/guarantees.md).
The app sees what Lambda sees: the path below the base, and in `requestContext` the whole
path the client asked for and the stage.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import time
import urllib.parse
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tools import function_url

log = logging.getLogger("tally.gateway")


@dataclass(frozen=True)
class GatewayAnswer:
    response_type: str  # API Gateway's GatewayResponseType
    status: int
    code: str  # Chalice's error class name, as "Code"
    message: str  # a template: `$context.authorizer.reason` is the authorizer's reason


ANSWERS = (
    GatewayAnswer("UNAUTHORIZED", 401, "UnauthorizedError", "a valid key is needed: send Authorization: Bearer <key>"),
    GatewayAnswer("ACCESS_DENIED", 403, "ForbiddenError", "$context.authorizer.reason"),
    GatewayAnswer("MISSING_AUTHENTICATION_TOKEN", 404, "NotFoundError", "no such route"),
    GatewayAnswer("RESOURCE_NOT_FOUND", 404, "NotFoundError", "no such route"),
    GatewayAnswer("THROTTLED", 429, "TooManyRequestsError", "too many requests: retry later"),
    GatewayAnswer("QUOTA_EXCEEDED", 429, "TooManyRequestsError", "request quota exceeded: retry later"),
    GatewayAnswer("AUTHORIZER_FAILURE", 503, "ServiceUnavailable", "the key could not be checked: retry later"),
    # What API Gateway answers when an authorizer raises anything but "Unauthorized" (the key
    # store unreachable, say).
    GatewayAnswer(
        "AUTHORIZER_CONFIGURATION_ERROR", 503, "ServiceUnavailable", "the key could not be checked: retry later"
    ),
    GatewayAnswer("DEFAULT_4XX", 400, "BadRequestError", "the request was refused"),
    GatewayAnswer("DEFAULT_5XX", 500, "InternalServerError", "an internal server error occurred"),
)
BY_TYPE = {answer.response_type: answer for answer in ANSWERS}
# DEFAULT_4XX/5XX keep the status API Gateway chose; the others set theirs.
KEEPS_STATUS = {"DEFAULT_4XX", "DEFAULT_5XX"}
CORS_PARAMETERS = {
    "gatewayresponse.header.Access-Control-Allow-Origin": "method.request.header.Origin",
    "gatewayresponse.header.Vary": "'Origin'",
}


def template(answer: GatewayAnswer) -> str:
    """The body template: JSON with the message as a string (reasons never hold a `"`)."""
    return '{"Code": "%s", "Message": "%s"}' % (answer.code, answer.message)


def swagger_responses() -> dict[str, Any]:
    """`x-amazon-apigateway-gateway-responses` for a template's DefinitionBody."""
    responses = {}
    for answer in ANSWERS:
        entry: dict[str, Any] = {
            "responseParameters": dict(CORS_PARAMETERS),
            "responseTemplates": {"application/json": template(answer)},
        }
        if answer.response_type not in KEEPS_STATUS:
            entry["statusCode"] = str(answer.status)
        responses[answer.response_type] = entry
    return responses


def put_responses(apigateway: Any, rest_api_id: str) -> list[str]:
    """The same answers on a deployed REST API (they take effect at its next deployment)."""
    for response_type, entry in swagger_responses().items():
        request = {
            "restApiId": rest_api_id,
            "responseType": response_type,
            "responseParameters": entry["responseParameters"],
            "responseTemplates": entry["responseTemplates"],
        }
        if "statusCode" in entry:
            request["statusCode"] = entry["statusCode"]
        apigateway.put_gateway_response(**request)
    return sorted(BY_TYPE)


def throttle_operations(rate_limit: int, burst_limit: int) -> list[dict[str, str]]:
    """update_stage patches setting the stage-wide (every method) rate and burst limits."""
    return [
        {"op": "replace", "path": "/*/*/throttling/rateLimit", "value": str(rate_limit)},
        {"op": "replace", "path": "/*/*/throttling/burstLimit", "value": str(burst_limit)},
    ]


# -- locally: Chalice's local gateway answers as API Gateway does with these responses ----------


def local_answer(response_type: str, request_headers: dict[str, str], reason: str = "") -> dict[str, Any]:
    answer = BY_TYPE[response_type]
    body = {"Code": answer.code, "Message": answer.message.replace("$context.authorizer.reason", reason)}
    headers = {"Content-Type": "application/json", "Vary": "Origin"}
    origin = {k.lower(): v for k, v in request_headers.items()}.get("origin")
    if origin:
        headers["Access-Control-Allow-Origin"] = origin
    return {"statusCode": answer.status, "headers": headers, "multiValueHeaders": {}, "body": json.dumps(body)}


# What the local authorizer cache measures its TTL with (tests move it).
cache_clock: Callable[[], float] = time.monotonic
# The local authorizer cache: per app, token -> (expiry on cache_clock, the authorizer's answer).
_answers: weakref.WeakKeyDictionary[Any, dict[str, tuple[float, dict[str, Any]]]] = weakref.WeakKeyDictionary()
# API Gateway's TTL when an authorizer sets none (authorizerResultTtlInSeconds' default).
DEFAULT_TTL_SECONDS = 300
_installed = False


def install() -> None:
    """Patch chalice.local so its own refusals use the answers above (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    from chalice import local
    from chalice.app import ChaliceAuthorizer

    original_handle = local.LocalGateway.handle_request
    original_check = local.LocalGatewayAuthorizer._check_can_invoke_view_function
    original_authorize = local.LocalGatewayAuthorizer.authorize

    def authorize(self: Any, raw_path: str, lambda_event: dict[str, Any], lambda_context: Any) -> Any:
        """Chalice's authorize, with API Gateway's cache of the authorizer's answer per token."""
        route = self._route_for_event(lambda_event)
        authorizer = route.authorizer if route is not None else None
        token = (lambda_event.get("headers") or {}).get("authorization")
        if not isinstance(authorizer, ChaliceAuthorizer) or token is None:
            return original_authorize(self, raw_path, lambda_event, lambda_context)
        ttl = authorizer.config.ttl_seconds
        ttl = DEFAULT_TTL_SECONDS if ttl is None else ttl
        arn = self._arn_builder.build_arn(lambda_event["requestContext"]["httpMethod"], raw_path)
        # Chalice's dev server makes a gateway per request: the cache lives with the app.
        cache = _answers.setdefault(self._app_object, {})
        expires, answer = cache.get(token, (0.0, {}))
        if expires <= cache_clock():
            answer = authorizer(self._prepare_authorizer_event(arn, lambda_event, lambda_context), lambda_context)
            if answer is None:  # Chalice's own error for an authorizer that answers nothing
                return original_authorize(self, raw_path, lambda_event, lambda_context)
            if ttl > 0:
                cache[token] = (cache_clock() + ttl, answer)
        if not self._check_can_invoke_view_function(arn, answer):
            raise local.ForbiddenError(
                {"x-amzn-RequestId": lambda_context.aws_request_id, "x-amzn-ErrorType": "AccessDeniedException"},
                b'{"Message": "User is not authorized to access this resource"}',
            )
        return self._update_lambda_event(lambda_event, copy.deepcopy(answer)), lambda_context

    def check(self: Any, arn: str, auth_result: dict[str, Any]) -> bool:
        self.last_context = auth_result.get("context") or {}
        return bool(original_check(self, arn, auth_result))

    def handle_request(self: Any, method: str, path: str, headers: dict[str, str], body: bytes | None) -> Any:
        if method_missing(self, method, path, headers, body):
            return local_answer("MISSING_AUTHENTICATION_TOKEN", headers)
        try:
            return original_handle(self, method, path, headers, body)
        except local.NotAuthorizedError:
            return local_answer("UNAUTHORIZED", headers)
        except local.ForbiddenError as exc:
            if exc.headers.get("x-amzn-ErrorType") == "AccessDeniedException":
                reason = str(getattr(self._authorizer, "last_context", {}).get("reason", ""))
                return local_answer("ACCESS_DENIED", headers, reason)
            return local_answer("MISSING_AUTHENTICATION_TOKEN", headers)
        except local.InvalidAuthorizerError:
            return local_answer("AUTHORIZER_CONFIGURATION_ERROR", headers)
        except Exception as exc:  # raised by an authorizer: "Unauthorized" is Lambda's 401
            if str(exc) == "Unauthorized":
                return local_answer("UNAUTHORIZED", headers)
            log.exception("authorizer failed")
            return local_answer("AUTHORIZER_FAILURE", headers)

    def any_method(self: Any, name: str) -> Any:
        """http.server answers a method without a `do_<METHOD>` with its own HTML 501: every
        method goes to the gateway instead, which answers as API Gateway does."""
        if name.startswith("do_"):
            return self._generic_handle
        raise AttributeError(name)

    original_match = local.RouteMatcher.match_route

    def match_route(self: Any, url: str) -> Any:
        """Chalice's match, with each path parameter percent-decoded as API Gateway's REST API
        hands it to Lambda (`/counters/a%3Ab` gives `a:b`); Chalice's dev server passes the
        encoded text."""
        found = original_match(self, url)
        captured = {name: urllib.parse.unquote(value) for name, value in found.captured.items()}
        return local.MatchResult(found.route, captured, found.query_params)

    local.RouteMatcher.match_route = match_route
    local.LocalGateway.handle_request = handle_request
    local.LocalGatewayAuthorizer._check_can_invoke_view_function = check
    local.LocalGatewayAuthorizer.authorize = authorize
    local.ChaliceRequestHandler.__getattr__ = any_method
    local.ChaliceRequestHandler.send_error = send_error


def send_error(handler: Any, code: int, message: str | None = None, explain: str | None = None) -> None:
    """What http.server itself refuses (a URL past 64 KiB: 414, a malformed request line: 400, too
    many headers: 431) as API Gateway's DEFAULT_4XX/5XX answers: the status kept, the body JSON
    in Chalice's shape instead of http.server's HTML page."""
    answer = BY_TYPE["DEFAULT_4XX" if code < 500 else "DEFAULT_5XX"]
    reason = message or handler.responses.get(code, ("",))[0]
    body = json.dumps({"Code": answer.code, "Message": f"{answer.message}: {reason}" if reason else answer.message})
    handler.log_error("code %d, message %s", code, reason)
    handler.send_response(code, message)
    handler.send_header("Connection", "close")
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(body.encode("utf-8"))


# -- locally: the API under its base path, as API Gateway serves a stage ---------------------------

# API Gateway's answer to a request for a stage the API does not have (`x-amzn-ErrorType` names
# the error, as on every answer API Gateway makes itself). Not a gateway response: the API's
# responses belong to its deployed stages, and this request reaches none.
NO_SUCH_STAGE_STATUS = 403
NO_SUCH_STAGE_HEADERS = {"Content-Type": "application/json", "x-amzn-ErrorType": "ForbiddenException"}
NO_SUCH_STAGE_BODY = '{"message":"Forbidden"}'


def normalized_base(base_path: str) -> str:
    """`api`, `/api` and `/api/` -> `/api`; `/` and `` (the API at the root) -> ``."""
    return "/" + base_path.strip("/") if base_path.strip("/") else ""


def below(base: str, path: str) -> str | None:
    """`path` (no query) as the API sees it under `base` (normalized): `/api` and `/api/` are its
    root resource, `/api/counters/x` is `/counters/x`; None when `path` is outside `base`."""
    if not base:
        return path or "/"
    if path == base:
        return "/"
    if path.startswith(base + "/"):
        return path[len(base) :]
    return None


def mounted_handler(base_path: str, stage_name: str) -> type[Any]:
    """Chalice's local request handler serving the API under `base_path` (`/api`: the stage on
    the execute-api URL; `/`: a custom domain's root mapping; `/tally`: a base path mapping)."""
    from http.server import BaseHTTPRequestHandler

    from chalice import local

    base = normalized_base(base_path)

    class StagedGateway(local.LocalGateway):  # type: ignore[misc]
        # The request's whole path: set by the handler before each request.
        request_path = "/"

        def _generate_lambda_event(self, method: str, path: str, headers: Any, body: bytes | None) -> Any:
            event = super()._generate_lambda_event(method, path, headers, body)
            # As API Gateway sets them: `path` holds the stage or base path, `stage` the stage.
            event["requestContext"]["path"] = self.request_path
            event["requestContext"]["stage"] = stage_name
            return event

    class Mounted(local.ChaliceRequestHandler):  # type: ignore[misc]
        def __init__(self, request: Any, client_address: Any, server: Any, app_object: Any, config: Any) -> None:
            # Chalice's __init__, with the gateway above (the base class handles the request
            # inside __init__, so the gateway must be in place before).
            self.local_gateway = StagedGateway(app_object, config)
            BaseHTTPRequestHandler.__init__(self, request, client_address, server)

        def _generic_handle(self) -> None:
            path, mark, query = self.path.partition("?")
            tracker = function_url.below_prefix(path)
            if tracker is not None:  # the tracker's function URL, a host of its own on AWS
                function_url.serve(self, self.local_gateway._app_object, tracker)
                return
            inner = below(base, path)
            if inner is None:
                self._parse_payload()  # read the body, so the connection stays usable
                self._send_http_response(NO_SUCH_STAGE_STATUS, dict(NO_SUCH_STAGE_HEADERS), NO_SUCH_STAGE_BODY)
                return
            self.local_gateway.request_path = path
            self.path = inner + mark + query
            super()._generic_handle()

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = do_PATCH = do_OPTIONS = _generic_handle

    return Mounted


def mount(server: Any, app: Any, config: Any, base_path: str, stage_name: str) -> None:
    """Make a server from chalice.local.create_local_server serve under `base_path`."""
    server.server.RequestHandlerClass = functools.partial(
        mounted_handler(base_path, stage_name), app_object=app, config=config
    )


def method_missing(gateway: Any, method: str, path: str, headers: dict[str, str], body: bytes | None) -> bool:
    """A path the app has, asked with a method it does not declare there. API Gateway answers
    that with MISSING_AUTHENTICATION_TOKEN ("including the cases when the client attempts to
    invoke an unsupported API method or resource"), never reaching the app; Chalice's local
    gateway would hand it to the app, which answers 405. OPTIONS is every path's preflight."""
    if method == "OPTIONS":
        return False
    try:
        event = gateway._generate_lambda_event(method, path, headers, body)
    except ValueError:  # no such path: the original handler answers that
        return False
    return method not in gateway._app_object.routes.get(event["requestContext"]["resourcePath"], {})
