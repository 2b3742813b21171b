"""The tracker's routes behind a Lambda function URL: its request made into the REST API's for the same route, and
the answer back into a function URL's response. No I/O. docs/tracker.md, "The function URL"."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs

# What the function URL serves: the script and its beacon (a preflight too, though tally.js sends
# a CORS-safelisted POST that needs none). Every other request gets NOT_FOUND.
ROUTES = frozenset(
    {("POST", "/beacon/pageview"), ("OPTIONS", "/beacon/pageview"), ("GET", "/tally.js"), ("OPTIONS", "/tally.js")}
)
# API Gateway's answer for a route the API does not have, as Tally configures it (tools/gateway.py).
NOT_FOUND = {"Code": "NotFoundError", "Message": "no such route"}


def rest_event(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """The API Gateway REST event (payload format 1.0, what Chalice's app takes) for a function
    URL's event, or None when the function URL does not serve its method and path."""
    http = event.get("requestContext", {}).get("http", {})
    method, path = str(http.get("method", "")), str(event.get("rawPath", ""))
    if (method, path) not in ROUTES:
        return None
    query = parse_qs(str(event.get("rawQueryString", "")), keep_blank_values=True)
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    return {
        "resource": path,
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": {k: v[-1] for k, v in query.items()} or None,
        "multiValueQueryStringParameters": query or None,
        "pathParameters": None,
        "stageVariables": None,
        "body": event.get("body"),
        "isBase64Encoded": bool(event.get("isBase64Encoded", False)),
        "requestContext": {
            "resourcePath": path,
            "httpMethod": method,
            "path": path,
            "stage": "$default",
            "requestId": str(event.get("requestContext", {}).get("requestId", "")),
            "identity": {"sourceIp": str(http.get("sourceIp", "")), "userAgent": str(http.get("userAgent", ""))},
        },
    }


def response(answer: Mapping[str, Any]) -> dict[str, Any]:
    """A function URL's response for Chalice's REST answer: the headers in one map (it takes no
    `multiValueHeaders`: values joined as HTTP joins them), without CORS headers."""
    merged = {**{k: [v] for k, v in (answer.get("headers") or {}).items()}, **(answer.get("multiValueHeaders") or {})}
    headers = {k: ", ".join(map(str, v)) for k, v in merged.items() if not k.lower().startswith("access-control-")}
    body = answer.get("body")
    return {
        "statusCode": int(answer.get("statusCode", 200)),
        "headers": headers,
        "body": "" if body is None else body,
        "isBase64Encoded": bool(answer.get("isBase64Encoded", False)),
    }


def not_found() -> dict[str, Any]:
    return response({"statusCode": 404, "headers": {"Content-Type": "application/json"}, "body": json.dumps(NOT_FOUND)})
