"""Numbers at the door, on moto: every number an event carries is one DynamoDB stores, stored in
its shortest form; values are bounded so that every sum of them fits DynamoDB's 38 digits, and
every accepted value is counted exactly, never set aside, whatever else its stream batch holds.

Bodies are written as raw JSON text: the numbers are sent as a client writes them, digit for digit.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer

from chalicelib.core import keyspace
from chalicelib.core.settings import Settings
from chalicelib.events import dimensions
from tests.functional.helpers import invoke, partition
from tests.functional.stream_fixtures import lambda_event, stored_event_records

SETTINGS = Settings()
MAX = "999999999999999999.999999"  # dimensions.VALUE_MAX as a client writes it
_deserialize = TypeDeserializer().deserialize


def post(client: Any, raw: str) -> Any:
    return client.http.post("/events", headers={"Content-Type": "application/json"}, body=raw)


def stored(aws: Any) -> list[dict[str, Any]]:
    return aws.dynamodb.scan(TableName=SETTINGS.events_table)["Items"]


def count_stream(client: Any, aws: Any) -> dict[str, Any]:
    """Every stored event's record in one stream batch, as Lambda would deliver it; its state."""
    answer = invoke(client, "on_event_records", lambda_event(stored_event_records(aws.dynamodb)))
    assert partition(aws.dynamodb, f"{keyspace.QUARANTINE}events-stream") == [], "a record was set aside"
    return dict(answer["state"])


def test_given_the_domains_edge_when_read_then_it_is_the_one_these_bodies_write() -> None:
    assert Decimal(MAX) == dimensions.VALUE_MAX


@pytest.mark.parametrize(
    ("amount", "exact"),
    [
        ("0E+999", "0"),
        ("1.0000000000000000000000000000000000000000", "1"),  # 41 digits, 40 trailing zeros: 1
        ("-0.0", "0"),
        ("1E3", "1000"),
    ],
)
def test_given_a_value_written_with_zeros_or_an_exponent_when_posted_and_counted_then_counted_as_the_number_it_is(
    client: Any, aws: Any, clock: Any, amount: str, exact: str
) -> None:
    response = post(client, f'{{"counter": "n", "values": {{"amount": {amount}}}}}')

    assert response.status_code == 201, response.body
    (item,) = stored(aws)
    assert item["values"] == {"M": {"amount": {"N": exact}}}
    assert count_stream(client, aws)["counted"] == 1
    answer = client.http.get("/counters/n").json_body
    assert (answer["count"], answer["sums_exact"]) == (1, {"amount": exact})


def test_given_attributes_written_with_trailing_zeros_when_posted_then_stored_in_their_shortest_form(
    client: Any, aws: Any, clock: Any
) -> None:
    raw = (
        '{"counter": "n", "attributes": {"one": 1.0000000000000000000000000000000000000000, '
        '"zero": 0E+999, "big": 10000000000000000000000000000000000000000, "deep": [{"x": -0.0}, 2.50], '
        '"edge": 9.9999999999999999999999999999999999999E125, "tiny": 1E-130}}'
    )

    response = post(client, raw)

    assert response.status_code == 201, response.body
    (item,) = stored(aws)
    attributes = item["attributes"]["M"]
    assert attributes["one"] == {"N": "1"} and attributes["zero"] == {"N": "0"}
    assert attributes["big"] == {"N": "1E+40"}
    assert attributes["deep"] == {"L": [{"M": {"x": {"N": "0"}}}, {"N": "2.5"}]}
    assert _deserialize(attributes["edge"]) == Decimal("9.9999999999999999999999999999999999999E125")
    assert _deserialize(attributes["tiny"]) == Decimal("1E-130")
    assert count_stream(client, aws)["counted"] == 1


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        # An attribute of 41 significant digits.
        ('{"counter": "n", "attributes": {"a": 12345678901234567890123456789012345678901}}', "body.attributes.a"),
        ('{"counter": "n", "attributes": {"a": [1, 1.2345678901234567890123456789012345678901]}}', "attributes.a[1]"),
        ('{"counter": "n", "attributes": {"a": 1E+126}}', "body.attributes.a"),
        ('{"counter": "n", "attributes": {"a": -1E-131}}', "body.attributes.a"),
        ('{"counter": "n", "attributes": {"a": 1E999999999}}', "body.attributes.a"),
        ('{"counter": "n", "attributes": {"a": 1.234567890123456789012345678901234567E-130}}', "body.attributes.a"),
        ('{"counter": "n", "attributes": {"a": NaN}}', "NaN"),
        ('{"counter": "n", "attributes": {"a": -Infinity}}', "-Infinity"),
        # Values one step past the domain, either way, and the out-of-range ones.
        ('{"counter": "n", "values": {"amount": 1000000000000000000}}', "event.values.amount"),
        ('{"counter": "n", "values": {"amount": -1000000000000000000.000000}}', "event.values.amount"),
        ('{"counter": "n", "values": {"amount": 0.0000001}}', "event.values.amount"),
        ('{"counter": "n", "values": {"amount": 1.0000001}}', "event.values.amount"),
        ('{"counter": "n", "values": {"amount": 1E30}}', "event.values.amount"),
        ('{"counter": "n", "values": {"amount": 9.9999999999999999999999999999999999999E125}}', "event.values.amount"),
        ('{"counter": "n", "values": {"amount": 1E-999999999}}', "body.values.amount"),
        ('{"counter": "n", "values": {"amount": 1E999999999}}', "body.values.amount"),
        ('{"events": [{"counter": "n"}, {"counter": "n", "values": {"a": 12.5, "b": 1E18}}]}', "events[1].values.b"),
    ],
)
def test_given_a_number_outside_its_domain_when_posted_then_400_naming_the_field_and_nothing_stored(
    client: Any, aws: Any, clock: Any, raw: str, named: str
) -> None:
    response = post(client, raw)

    assert response.status_code == 400, response.body
    assert set(response.json_body) == {"Code", "Message"} and response.json_body["Code"] == "BadRequestError"
    assert named in response.json_body["Message"]
    assert stored(aws) == []


def test_given_values_at_the_domains_edges_beside_ordinary_ones_in_one_stream_batch_then_all_counted_exactly(
    client: Any, aws: Any, clock: Any
) -> None:
    # The values a stream batch once could not count, beside ordinary ones: out of the domain,
    # refused at the door; at its edges, accepted and counted, in one batch with the rest.
    for outside in ("9.9999999999999999999999999999999999999E125", "1E30"):
        refused = post(client, f'{{"counter": "mix", "values": {{"amount": {outside}}}}}')
        assert refused.status_code == 400, outside
    singles = ["12.5", "0.000001", MAX]  # one-event items
    packed = [MAX, f"-{MAX}", "0.000001", "-0.000001", "1E17"]  # one pack, sides minus, plus, minus, ...
    for amount in singles:
        assert post(client, f'{{"counter": "mix", "values": {{"amount": {amount}}}}}').status_code == 201
    events = ", ".join(
        f'{{"counter": "mix", "dimensions": {{"side": "{"plus" if i % 2 else "minus"}"}}, "values": {{"amount": {a}}}}}'
        for i, a in enumerate(packed)
    )
    assert post(client, f'{{"events": [{events}]}}').status_code == 201

    state = count_stream(client, aws)

    n = len(singles) + len(packed)
    assert (state["counted"], state["quarantined"], state["failed"]) == (n, 0, 0)
    assert sum(Decimal(a) for a in singles + packed) == Decimal("1100000000000000012.5")
    answer = client.http.get("/counters/mix").json_body
    assert (answer["count"], answer["sums_exact"]) == (n, {"amount": "1100000000000000012.5"})
    histogram = client.http.get("/counters/mix/histogram?window=2h&resolution=minute").json_body
    assert [b["sums_exact"] for b in histogram["buckets"] if b["count"]] == [{"amount": "1100000000000000012.5"}]
    breakdown = client.http.get("/counters/mix/breakdown?by=side").json_body
    sides = {v["value"]: v["sums_exact"]["amount"] for v in breakdown["values"]}
    assert sides == {"minus": "1100000000000000000", "plus": "-1000000000000000000"}
