"""Inputs that used to cost minutes, gigabytes or a 5xx: each a 400, with work bounded before any loop.

Work is measured by counting what the code builds (time buckets, parsed JSON documents,
converted attributes, storage calls), never by wall time.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest
from botocore.exceptions import ClientError

from chalicelib.core import inputs, keyspace, window_params
from tests.functional import work_meter
from tests.functional.work_meter import Meter

JSON_HEADERS = {"Content-Type": "application/json"}


@pytest.fixture
def work(aws: Any, app_module: Any, monkeypatch: pytest.MonkeyPatch) -> Meter:
    return work_meter.install(aws, monkeypatch)


def assert_rejected(response: Any, *fragments: str) -> str:
    assert response.status_code == 400, (response.status_code, response.body[:300])
    body = response.json_body
    assert set(body) == {"Code", "Message"} and body["Code"] == "BadRequestError", body
    for fragment in fragments:
        assert fragment in body["Message"], (fragment, body["Message"])
    return str(body["Message"])


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


# -- windows and histograms -------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/counters/x/histogram?start=2000-01-01T00:00:00Z&end=2099-12-31T00:00:00Z&resolution=minute",
        "/counters/x/histogram?start=2000-01-01T00:00:00Z&end=2099-12-31T00:00:00Z&resolution=day",
        "/counters/x/histogram?window=400d&resolution=minute",
        "/counters/x/histogram?window=999999d&resolution=day",
        "/counters/x?start=2000-01-01T00:00:00Z&end=2099-12-31T00:00:00Z",
        "/counters/x?window=999999d",
        "/views?url=a&start=2000-01-01T00:00:00Z&end=2099-12-31T00:00:00Z",
        "/views?url=a&window=401d",
        "/views?url=a&window=999999d&end=1795000000000",
    ],
)
def test_given_a_window_too_long_or_too_fine_when_read_then_400_before_any_bucket_is_built(
    client: Any, clock: Any, work: Meter, path: str
) -> None:
    assert_rejected(client.http.get(path))
    assert work.buckets == 0
    assert work.calls == []


def test_given_the_longest_allowed_histogram_when_read_then_at_most_the_cap_of_buckets_built(
    client: Any, clock: Any, work: Meter
) -> None:
    minutes = window_params.MAX_HISTOGRAM_BUCKETS - 1
    response = client.http.get(f"/counters/x/histogram?window={minutes}m&resolution=minute")
    assert response.status_code == 200, response.body[:300]
    assert len(response.json_body["buckets"]) <= window_params.MAX_HISTOGRAM_BUCKETS
    # The minute buckets, plus one per hour item they are read from (and the window's ends).
    assert work.buckets <= window_params.MAX_HISTOGRAM_BUCKETS + window_params.MAX_HISTOGRAM_BUCKETS // 60 + 4


# -- bodies -----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/events", "/views", "/hyperloglog/visitors"])
def test_given_json_nested_thousands_deep_when_posted_then_400_and_nothing_sent_on(
    client: Any, clock: Any, work: Meter, path: str
) -> None:
    for body in [deep(5000), '{"data": %s}' % deep(3000), '{"counter": "c", "attributes": {"a": %s}}' % deep(41)]:
        assert_rejected(client.http.post(path, headers=JSON_HEADERS, body=body), "nested deeper")
    assert work.calls == []


def test_given_attributes_nested_deeper_than_dynamodb_stores_when_posted_then_400_names_them(
    client: Any, clock: Any, work: Meter
) -> None:
    body = '{"counter": "c", "attributes": {"a": %s}}' % deep(32)
    assert_rejected(client.http.post("/events", headers=JSON_HEADERS, body=body), "event.attributes", "32 levels")
    assert work.calls == []
    fits = '{"counter": "c", "attributes": {"a": %s}}' % deep(31)
    assert client.http.post("/events", headers=JSON_HEADERS, body=fits).status_code == 201


def test_given_a_body_of_nested_attributes_over_6_or_10_mb_when_posted_then_refused_before_the_app_parses_it(
    client: Any, clock: Any, work: Meter
) -> None:
    """Such a body never reaches the app on AWS: API Gateway refuses one over 10 MB (413), and
    Lambda an event over 6 MB, which API Gateway answers 500 (docs/guarantees.md)."""
    attributes = {f"k{i}": {"a": [[1, 2], {"b": [3]}]} for i in range(300_000)}
    body = json.dumps({"counter": "c", "attributes": attributes})
    seven_mb = json.dumps({"counter": "c", "attributes": dict(list(attributes.items())[:180_000])})
    assert len(body) > 10_000_000 and 6_000_000 < len(seven_mb) < 10_000_000
    assert client.http.post("/events", headers=JSON_HEADERS, body=body).status_code == 413
    assert client.http.post("/events", headers=JSON_HEADERS, body=seven_mb).status_code == 500
    # Under the size cap but over the count of values: still refused before parsing.
    smaller = json.dumps({"counter": "c", "attributes": {f"k{i}": [1, 2, 3] for i in range(40_000)}})
    assert len(smaller) < inputs.MAX_BODY_BYTES
    assert_rejected(client.http.post("/events", headers=JSON_HEADERS, body=smaller), "JSON values")
    assert work.parses == 0 and work.conversions == 0 and work.calls == []


def test_given_attributes_over_16_kb_when_posted_then_400_before_they_are_converted(
    client: Any, clock: Any, work: Meter
) -> None:
    body = json.dumps({"counter": "c", "attributes": {"a": [1.5] * 5000}})
    assert_rejected(client.http.post("/events", headers=JSON_HEADERS, body=body), "attributes is larger")
    assert work.conversions == 0 and work.calls == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"counter": "c", "attributes": {"amount": 1e+200}}', "body.attributes.amount"),
        ('{"counter": "c", "attributes": {"amount": 1e-131}}', "body.attributes.amount"),
        ('{"counter": "c", "attributes": {"n": 123456789012345678901234567890123456789}}', "body.attributes.n"),
        ('{"counter": "c", "attributes": {"amount": NaN}}', "NaN"),
        ('{"counter": "c", "attributes": {"amount": -Infinity}}', "Infinity"),
    ],
)
def test_given_a_number_dynamodb_cannot_store_when_posted_then_400_names_it_and_nothing_written(
    client: Any, clock: Any, work: Meter, body: str, field: str
) -> None:
    assert_rejected(client.http.post("/events", headers=JSON_HEADERS, body=body), field)
    assert work.calls == []


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/hyperloglog/visitors", '{"data": "a\\ud800"}', "body.data"),
        ("/hyperloglog/visitors", '{"data": ["ok", "\\udfff"]}', "body.data[1]"),
        ("/events", '{"counter": "c", "id": "\\udc00x"}', "body.id"),
        (
            "/events",
            '{"events": [{"counter": "c", "attributes": {"\\ud83d": 1}}]}',
            "a key of body.events[0].attributes",
        ),
        ("/views", '{"url": "u", "time": 1795000000000, "clientId": "\\udc00x"}', "body.clientId"),
    ],
)
def test_given_a_lone_surrogate_anywhere_in_a_body_when_posted_then_400_names_the_field(
    client: Any, clock: Any, work: Meter, path: str, body: str, field: str
) -> None:
    assert_rejected(client.http.post(path, headers=JSON_HEADERS, body=body), field, "surrogate")
    assert work.calls == []


# -- digits, times, storage refusals ----------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/reports?limit=" + quote("²"),
        "/reports?limit=" + quote("٣"),
        "/reports?limit=1_0",
        "/views?url=a&start=" + quote("²"),
        "/views?url=a&end=" + quote("１７９５０００００００００"),
        "/counters/x?start=" + quote("²") + "&end=1795000000000",
        "/counters/x?end=" + "9" * 5000,
    ],
)
def test_given_digits_int_refuses_or_an_overlong_number_when_read_then_400(
    client: Any, clock: Any, work: Meter, path: str
) -> None:
    assert_rejected(client.http.get(path))
    assert work.calls == []


def test_given_an_event_stamped_past_the_allowed_clock_skew_when_posted_then_400_says_why(
    client: Any, aws: Any, clock: Any, app_module: Any
) -> None:
    skew_ms = app_module.settings.max_future_skew_seconds * 1000
    message = assert_rejected(
        client.http.post(
            "/events", headers=JSON_HEADERS, body=json.dumps({"counter": "c", "time": "2099-01-01T00:00:00Z"})
        ),
        "event.time",
        "in the future",
    )
    assert str(app_module.settings.max_future_skew_seconds) in message
    late = client.http.post(
        "/events", headers=JSON_HEADERS, body=json.dumps({"counter": "c", "time": clock.now + skew_ms})
    )
    assert late.status_code == 201, "a clock exactly at the allowed skew is accepted"
    assert_rejected(
        client.http.post(
            "/events", headers=JSON_HEADERS, body=json.dumps({"counter": "c", "time": clock.now + skew_ms + 1})
        ),
        "in the future",
    )
    assert len(aws.dynamodb.scan(TableName=app_module.settings.events_table)["Items"]) == 1


def test_given_storage_refuses_the_data_itself_when_posted_then_400_at_once_not_503_after_retries(
    client: Any, aws: Any, clock: Any, work: Meter, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(**kwargs: Any) -> Any:
        work.calls.append("batch_write_item")
        raise ClientError({"Error": {"Code": "ValidationException", "Message": "bad value"}}, "BatchWriteItem")

    monkeypatch.setattr(aws.dynamodb, "batch_write_item", refuse)
    response = client.http.post("/events", headers=JSON_HEADERS, body=json.dumps({"counter": "c", "id": "x"}))
    assert_rejected(response, "ValidationException", "id")
    assert work.calls == ["batch_write_item"], "refused once, not retried"


def test_given_too_many_or_too_long_query_parameters_when_read_then_400(client: Any, clock: Any, work: Meter) -> None:
    many = "&".join(f"p{i}=1" for i in range(inputs.MAX_QUERY_PARAMS + 1))
    assert_rejected(client.http.get("/counters/x?" + many), "query parameters")
    assert_rejected(client.http.get("/views?url=" + "a" * (inputs.MAX_QUERY_CHARS + 1)), "longer than")
    assert work.calls == []


@pytest.mark.parametrize(
    ("code", "status"),
    [("ValidationException", 400), ("ProvisionedThroughputExceededException", 503), ("InternalServerError", 503)],
)
def test_given_storage_answers_an_error_code_on_a_read_when_requested_then_the_code_alone_picks_400_or_503(
    client: Any, aws: Any, clock: Any, monkeypatch: pytest.MonkeyPatch, code: str, status: int
) -> None:
    real = aws.dynamodb.get_item

    def refuse(**kwargs: Any) -> Any:
        if kwargs["Key"]["pk"]["S"] == keyspace.ACCESS_KEY:
            return real(**kwargs)  # the key's own check passes
        # The message names the other kind: only the code may decide (core.storage_errors).
        raise ClientError({"Error": {"Code": code, "Message": "ValidationException or throttled"}}, "GetItem")

    monkeypatch.setattr(aws.dynamodb, "get_item", refuse)
    response = client.http.get("/views?url=https://blog.example/a")
    assert response.status_code == status, response.body
    body = response.json_body
    assert set(body) == {"Code", "Message"} and "could not read the view counter" in body["Message"]
