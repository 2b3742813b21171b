"""`beacon_url`, the tracker's routes behind a Lambda function URL, invoked as Lambda invokes it
(payload format version 2.0): a page view counted as through the REST route, bad input and a
bad key refused with the REST route's status and JSON error, the script served, other paths 404,
and no CORS header of the route's own (the function URL's configuration sets them)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.conftest import create_key
from tests.functional.helpers import invoke
from tests.functional.site_helpers import CHROME, SETTINGS, Counting, beacon
from tools import function_url

SITE = "blog.example"
ORIGIN = "https://blog.example"


@pytest.fixture
def key(aws: Any) -> str:
    return create_key(aws, ["ingest"], origins=[ORIGIN])


def through_url(client: Any, key: str | None, body: Any, origin: str = ORIGIN, **kwargs: Any) -> dict[str, Any]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"User-Agent": CHROME, "Origin": origin}
    if raw:  # as a browser: a GET carries no Content-Type
        headers["Content-Type"] = "text/plain;charset=UTF-8"
    query = "" if key is None else f"key={key}"
    event = function_url.event(
        kwargs.get("method", "POST"), kwargs.get("path", "/beacon/pageview"), query, headers, raw
    )
    answer: dict[str, Any] = invoke(client, function_url.FUNCTION, event)
    return answer


def body_bytes(answer: dict[str, Any]) -> bytes:
    """A function URL response's body as the client receives it."""
    body = answer.get("body") or ""
    if answer.get("isBase64Encoded"):
        return base64.b64decode(body)
    return body.encode("utf-8") if isinstance(body, str) else bytes(body)


def json_of(answer: dict[str, Any]) -> Any:
    return json.loads(body_bytes(answer))


def test_given_a_payload_2_event_when_the_function_url_handles_it_then_the_page_view_counts(
    client: Any, aws: Any, clock: Any, key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    body = {"url": f"{ORIGIN}/posts/1", "time": clock.now, "referrer": "", "width": 1280}
    capsys.readouterr()
    answer = through_url(client, key, body)
    assert answer["statusCode"] == 202, answer
    assert json_of(answer) == {"counted": True, "site": SITE}
    # A request, not a background invocation: no log line of its own when it succeeds (as on
    # the REST route), so a page view pays for no CloudWatch Logs ingestion.
    assert '"message":"invocation"' not in capsys.readouterr().out
    Counting(client, aws).process()
    assert client.http.get(f"/counters/site:{SITE}?window=1d").json_body["count"] == 1
    assert client.http.get(f"/hyperloglog/site:{SITE}?window=1d").json_body["cardinality"] == 1


@pytest.mark.parametrize(
    ("body", "use_key", "origin", "status", "code"),
    [
        (b"{not json", True, ORIGIN, 400, "BadRequestError"),
        ({"url": "https://blog.example/", "time": 0, "colour": "red"}, True, ORIGIN, 400, "BadRequestError"),
        ({"url": "https://blog.example/"}, True, ORIGIN, 400, "BadRequestError"),
        ({"url": "https://blog.example/", "time": "now"}, False, ORIGIN, 401, "UnauthorizedError"),
        ({"url": "https://blog.example/", "time": "now"}, True, "https://elsewhere.example", 403, "ForbiddenError"),
    ],
)
def test_given_bad_input_when_sent_to_the_function_url_then_refused_as_the_rest_route_refuses_it(
    client: Any, aws: Any, clock: Any, key: str, body: Any, use_key: bool, origin: str, status: int, code: str
) -> None:
    if isinstance(body, dict) and body.get("time") == "now":
        body = {**body, "time": clock.now}
    answer = through_url(client, key if use_key else None, body, origin=origin)
    rest = beacon(client, key if use_key else "", body if isinstance(body, dict) else {}, origin=origin)
    assert answer["statusCode"] == status, answer
    assert json_of(answer)["Code"] == code
    assert "Message" in json_of(answer)
    if isinstance(body, dict):  # the same request through API Gateway's route: the same answer
        assert (rest.status_code, rest.json_body["Code"]) == (status, code)
    assert not aws.dynamodb.scan(TableName=SETTINGS.events_table)["Items"]
    views = aws.sqs.get_queue_url(QueueName=SETTINGS.views_queue)["QueueUrl"]
    assert not aws.sqs.receive_message(QueueUrl=views).get("Messages")


def test_given_any_answer_when_sent_then_it_carries_no_cors_header_of_the_route(
    client: Any, clock: Any, key: str
) -> None:
    # The function URL's CORS configuration adds them on AWS (and locally the gateway does):
    # the route's would be a second, different Access-Control-Allow-Origin.
    good = through_url(client, key, {"url": f"{ORIGIN}/", "time": clock.now})
    refused = through_url(client, key, {"url": f"{ORIGIN}/", "time": clock.now}, origin="https://elsewhere.example")
    for answer in (good, refused):
        assert not [h for h in answer["headers"] if h.lower().startswith("access-control-")], answer["headers"]


def test_given_the_script_path_when_asked_then_the_tracker_script_is_served(client: Any) -> None:
    answer = through_url(client, None, b"", method="GET", path="/tally.js")
    assert answer["statusCode"] == 200
    assert b"tally" in body_bytes(answer)
    assert answer["headers"]["Content-Type"].startswith("text/javascript")


@pytest.mark.parametrize(("method", "path"), [("POST", "/events"), ("GET", "/keys"), ("GET", "/beacon/pageview")])
def test_given_a_route_the_function_url_does_not_serve_when_asked_then_404_in_the_json_error_shape(
    client: Any, key: str, method: str, path: str
) -> None:
    answer = through_url(client, key, b"{}", method=method, path=path)
    assert answer["statusCode"] == 404
    assert json_of(answer) == {"Code": "NotFoundError", "Message": "no such route"}


def test_given_the_function_urls_cors_when_emulated_then_any_origin_may_read_and_preflight() -> None:
    assert function_url.cors_headers("POST", {"Origin": "https://any.example"}) == {"Access-Control-Allow-Origin": "*"}
    preflight = function_url.cors_headers("OPTIONS", {"origin": "https://any.example"})
    assert preflight["Access-Control-Allow-Methods"] == "GET, POST"
    assert preflight["Access-Control-Max-Age"] == "600"
    assert function_url.cors_headers("POST", {}) == {}
