"""The tracker's Lambda function URL (`beacon_url` in app.py), defined once for every path:

- `tools.provision` (`make deploy`) creates or updates it after `chalice deploy`
  (`ensure`), with the resource-based policy statements a public URL needs;
- `tools.cfn_template` (`make package`) adds it to the template (`cfn_fragments`:
  `AWS::Lambda::Url` and two `AWS::Lambda::Permission`s);
- the local stack serves it under PATH_PREFIX on the API's port (`serve`), with the event
  shape Lambda gives a function URL (payload format version 2.0) and the CORS headers its
  configuration below would give (docs/local-stack.md, "The tracker's function URL").

Why each setting: docs/guarantees.md, "The tracker's function URL".
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

FUNCTION = "beacon_url"  # the @app.lambda_function in app.py
# Every origin: the tracker runs on any site. A key's `origins` stay a check of the request
# (403), as on the REST route; CORS only lets the page read the answer, which holds no data.
# No credentials (tally.js sends none), a preflight cached 10 minutes (what the REST API's says).
CORS: dict[str, Any] = {
    "AllowOrigins": ["*"],
    "AllowMethods": ["GET", "POST"],
    "AllowHeaders": ["content-type"],
    "AllowCredentials": False,
    "MaxAge": 600,
}
AUTH_TYPE = "NONE"
# The policy statements' ids: `ensure` finds its own by them.
URL_STATEMENT = "FunctionURLAllowPublicAccess"
INVOKE_STATEMENT = "FunctionURLAllowInvokeAction"
PATH_PREFIX = "/beacon-url"  # locally: outside every stage path and every route of the API


def url_logical_id(function_id: str) -> str:
    return f"{function_id}Url"


def cfn_fragments(function_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(resources, outputs) for the function Chalice names `function_id` in its template."""
    function = {"Fn::GetAtt": [function_id, "Arn"]}
    url_id = url_logical_id(function_id)
    resources = {
        url_id: {
            "Type": "AWS::Lambda::Url",
            "Properties": {"TargetFunctionArn": function, "AuthType": AUTH_TYPE, "Cors": dict(CORS)},
        },
        f"{url_id}Permission": {
            "Type": "AWS::Lambda::Permission",
            "Properties": {
                "FunctionName": function,
                "Action": "lambda:InvokeFunctionUrl",
                "Principal": "*",
                "FunctionUrlAuthType": AUTH_TYPE,
            },
        },
        f"{url_id}InvokePermission": {
            "Type": "AWS::Lambda::Permission",
            "Properties": {
                "FunctionName": function,
                "Action": "lambda:InvokeFunction",
                "Principal": "*",
                "InvokedViaFunctionUrl": True,
            },
        },
    }
    outputs = {"BeaconFunctionUrl": {"Value": {"Fn::GetAtt": [url_id, "FunctionUrl"]}}}
    return resources, outputs


def ensure(lambda_client: Any, function_name: str) -> str:
    """Create or update the function URL and its two statements (safe to re-run); its URL."""
    try:
        lambda_client.get_function_url_config(FunctionName=function_name)
        config = lambda_client.update_function_url_config(FunctionName=function_name, AuthType=AUTH_TYPE, Cors=CORS)
    except lambda_client.exceptions.ResourceNotFoundException:
        config = lambda_client.create_function_url_config(FunctionName=function_name, AuthType=AUTH_TYPE, Cors=CORS)
    statements = (
        {
            "StatementId": URL_STATEMENT,
            "Action": "lambda:InvokeFunctionUrl",
            "Principal": "*",
            "FunctionUrlAuthType": AUTH_TYPE,
        },
        {
            "StatementId": INVOKE_STATEMENT,
            "Action": "lambda:InvokeFunction",
            "Principal": "*",
            "InvokedViaFunctionUrl": True,
        },
    )
    # Lambda refuses a statement id already in the policy (ResourceConflictException; moto adds
    # it again): add only what is missing, so a second deploy changes nothing.
    try:
        policy = json.loads(lambda_client.get_policy(FunctionName=function_name)["Policy"])
    except lambda_client.exceptions.ResourceNotFoundException:  # no policy yet
        policy = {"Statement": []}
    present = {statement.get("Sid") for statement in policy.get("Statement", [])}
    for statement in statements:
        if statement["StatementId"] not in present:
            lambda_client.add_permission(FunctionName=function_name, **statement)
    return str(config["FunctionUrl"])


# -- locally -------------------------------------------------------------------------------------


def event(
    method: str,
    path: str,
    query: str = "",
    headers: Mapping[str, str] | None = None,
    body: bytes | None = None,
    source_ip: str = "127.0.0.1",
    domain: str = "127.0.0.1",
) -> dict[str, Any]:
    """The event Lambda hands a function for a request to its URL (payload format version 2.0):
    header names in lower case, a repeated header's values joined by commas."""
    lowered: dict[str, str] = {}
    for name, value in (headers or {}).items():
        key = name.lower()
        lowered[key] = f"{lowered[key]},{value}" if key in lowered else value
    now = time.time()
    text_body: str | None = None
    encoded = False
    if body:
        try:
            text_body = body.decode("utf-8")
        except UnicodeDecodeError:
            text_body, encoded = base64.b64encode(body).decode("ascii"), True
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query,
        "headers": lowered,
        "requestContext": {
            "accountId": "anonymous",
            "apiId": domain.split(".")[0],
            "domainName": domain,
            "domainPrefix": domain.split(".")[0],
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": lowered.get("user-agent", ""),
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "body": text_body,
        "isBase64Encoded": encoded,
    }


def cors_headers(method: str, request_headers: Mapping[str, str]) -> dict[str, str]:
    """The CORS headers the function URL adds, per CORS above. On AWS the function URL adds
    them itself (the function's own are dropped: chalicelib/sites/function_url.py); locally
    this stands in for it."""
    lowered = {k.lower(): v for k, v in request_headers.items()}
    origin = lowered.get("origin")
    if origin is None or not ("*" in CORS["AllowOrigins"] or origin in CORS["AllowOrigins"]):
        return {}
    headers = {"Access-Control-Allow-Origin": "*" if "*" in CORS["AllowOrigins"] else origin}
    if method == "OPTIONS":
        headers["Access-Control-Allow-Methods"] = ", ".join(CORS["AllowMethods"])
        headers["Access-Control-Allow-Headers"] = ", ".join(CORS["AllowHeaders"])
        headers["Access-Control-Max-Age"] = str(CORS["MaxAge"])
    return headers


def below_prefix(path: str) -> str | None:
    """`/beacon-url/tally.js` -> `/tally.js`; None outside PATH_PREFIX."""
    if path == PATH_PREFIX:
        return "/"
    if path.startswith(PATH_PREFIX + "/"):
        return path[len(PATH_PREFIX) :]
    return None


def serve(handler: Any, app: Any, inner_path: str) -> None:
    """Answer one request of Chalice's local request handler as the function URL would: the
    function called with a payload 2.0 event, its response sent with the CORS headers above."""
    headers, body = handler._parse_payload()
    query = urlsplit(handler.path).query
    function_event = event(handler.command, inner_path, query, headers, body, handler.client_address[0])
    function = next(f for f in app.pure_lambda_functions if f.name == FUNCTION)
    result = function(function_event, LocalContext(FUNCTION))
    out = {str(k): str(v) for k, v in (result.get("headers") or {}).items()}
    out.update(cors_headers(handler.command, headers))
    payload = result.get("body") or ""
    data = base64.b64decode(payload) if result.get("isBase64Encoded") else str(payload).encode("utf-8")
    handler._send_http_response(int(result.get("statusCode", 200)), out, data)


class LocalContext:
    """What the handler reads of Lambda's context object."""

    def __init__(self, name: str) -> None:
        self.function_name = name
        self.aws_request_id = str(uuid.uuid4())
        self.memory_limit_in_mb = 128

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


def describe(host: str, port: int) -> str:
    return f"http://{host}:{port}{PATH_PREFIX}/"
