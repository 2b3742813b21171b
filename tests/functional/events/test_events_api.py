"""POST /events and the counter reads, through chalice's test client on moto."""

from __future__ import annotations

import json
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer

from chalicelib.core.settings import Settings
from chalicelib.events import packs
from tests.fakes import unprocessed_writes


def post(client: Any, body: Any) -> Any:
    return client.http.post("/events", headers={"Content-Type": "application/json"}, body=json.dumps(body))


def stored_events(aws: Any) -> list[dict[str, Any]]:
    return aws.dynamodb.scan(TableName=Settings().events_table)["Items"]


def stored_ids(aws: Any) -> list[str]:
    """The ids of every event stored, packs unpacked."""
    deserialize = TypeDeserializer().deserialize
    items = [{k: deserialize(v) for k, v in i.items()} for i in stored_events(aws)]
    return sorted(str(event["id"]) for item in items for event in packs.events_in(item))


def test_given_one_event_when_posted_then_201_with_its_id_and_one_item_stored(
    client: Any, aws: Any, clock: Any
) -> None:
    response = post(client, {"counter": "jobs", "id": "e-1", "time": clock.now})
    assert response.status_code == 201
    assert response.json_body == {"ids": ["e-1"]}
    items = stored_events(aws)
    assert len(items) == 1
    assert items[0]["counter"]["S"] == "jobs"
    assert items[0]["time"]["N"] == str(clock.now)


def test_given_event_without_id_or_time_when_posted_then_generated_id_and_now(
    client: Any, aws: Any, clock: Any
) -> None:
    response = post(client, {"counter": "jobs"})
    assert response.status_code == 201
    (event_id,) = response.json_body["ids"]
    item = stored_events(aws)[0]
    assert item["id"]["S"] == event_id
    assert item["time"]["N"] == str(clock.now)


def test_given_batch_with_one_bad_event_when_posted_then_400_names_it_and_nothing_written(
    client: Any, aws: Any, clock: Any
) -> None:
    body = {"events": [{"counter": "jobs"}, {"counter": "jobs", "time": "yesterday"}, {"counter": "jobs"}]}
    response = post(client, body)
    assert response.status_code == 400
    assert response.json_body["Code"] == "BadRequestError"
    assert "events[1].time" in response.json_body["Message"]
    assert stored_events(aws) == []


def test_given_bad_bodies_when_posted_then_400_and_nothing_written(client: Any, aws: Any, clock: Any) -> None:
    bad = [
        {"counter": "has space"},
        {"counter": "x" * 201},
        {"counter": "jobs", "id": ""},
        {"counter": "jobs", "retention": "long"},
        {"counter": "jobs", "time": "2026-11-21T10:00:00"},  # no zone
        {"counter": "jobs", "attributes": [1]},
        {"counter": "jobs", "colour": "red"},
        {"events": []},
        {"events": [{"counter": "jobs"}] * 26},
        [1, 2],
    ]
    for body in bad:
        response = post(client, body)
        assert response.status_code == 400, body
        assert set(response.json_body) == {"Code", "Message"}
    response = client.http.post("/events", headers={"Content-Type": "application/json"}, body="{not json")
    assert response.status_code == 400
    assert stored_events(aws) == []


def test_given_batch_of_25_when_posted_then_one_pack_holds_them_in_order(client: Any, aws: Any, clock: Any) -> None:
    response = post(client, {"events": [{"counter": f"c{i % 3}", "attributes": {"amount": 1.5}} for i in range(25)]})
    assert response.status_code == 201
    (item,) = stored_events(aws)
    assert item["kind"]["S"] == "pack" and item["n"]["N"] == "25"
    assert [e["M"]["i"]["S"] for e in item["e"]["L"]] == response.json_body["ids"]
    assert [e["M"]["c"]["S"] for e in item["e"]["L"]] == [f"c{i % 3}" for i in range(25)]
    assert stored_ids(aws) == sorted(response.json_body["ids"])


def test_given_batches_when_posted_then_spread_across_write_shards_of_one_quarter_hour(
    client: Any, aws: Any, clock: Any
) -> None:
    for _ in range(40):
        assert post(client, {"events": [{"counter": "c"}, {"counter": "d"}]}).status_code == 201
    items = stored_events(aws)
    assert len(items) == 40
    quarter = {item["pk"]["S"].split("#")[0] for item in items}
    assert len(quarter) == 1 and len(next(iter(quarter))) == 12
    assert {int(item["pk"]["S"].split("#")[1]) for item in items} == set(range(Settings().event_write_shards))
    assert len({item["sk"]["S"] for item in items}) == 40


def test_given_bad_query_when_counter_read_then_400(client: Any, clock: Any) -> None:
    for path in [
        "/counters/jobs?window=24x",
        "/counters/bad%20name",
        "/counters/jobs?start=2026-11-21T10:00:00Z&end=2026-11-20T10:00:00Z",
        "/counters/jobs/histogram?window=24h&resolution=second",
        "/counters/jobs/histogram?window=30d&resolution=minute",
    ]:
        response = client.http.get(path)
        assert response.status_code == 400, path
        assert response.json_body["Code"] == "BadRequestError"


def test_given_unprocessed_items_once_when_posted_then_retried_and_all_stored(
    client: Any, app_module: Any, aws: Any, clock: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(packs, "PACK_MAX_BYTES", 1)  # one item per event: several items to leave unprocessed
    monkeypatch.setattr(app_module.aws, "dynamodb", unprocessed_writes(aws.dynamodb, stuck=3, times=2), raising=False)
    response = post(client, {"events": [{"counter": "jobs", "id": f"e{i}"} for i in range(10)]})
    assert response.status_code == 201
    assert sorted(i["id"]["S"] for i in stored_events(aws)) == sorted(f"e{i}" for i in range(10))


def test_given_items_that_stay_unprocessed_when_posted_then_503_says_which_were_stored(
    client: Any, app_module: Any, aws: Any, clock: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(packs, "PACK_MAX_BYTES", 1)  # one item per event
    monkeypatch.setattr(app_module.aws, "dynamodb", unprocessed_writes(aws.dynamodb, stuck=2, times=100), raising=False)
    response = post(client, {"events": [{"counter": "jobs", "id": f"e{i}"} for i in range(5)]})
    assert response.status_code == 503
    body = response.json_body
    assert body["Code"] == "PartialWrite"
    assert body["failed"] == ["e3", "e4"] and body["stored"] == ["e0", "e1", "e2"]
    assert sorted(i["id"]["S"] for i in stored_events(aws)) == body["stored"]


@pytest.mark.parametrize(
    "attributes", [{"": 1}, {"a": {"": None}}, {"a": [{"b": 1}, {"": "x"}]}, {"M": {"L": [], "": {}}}]
)
def test_given_an_empty_attribute_name_at_any_depth_when_posted_then_400_and_nothing_stored(
    client: Any, aws: Any, attributes: dict[str, Any]
) -> None:
    response = client.http.post(
        "/events",
        headers={"Content-Type": "application/json"},
        body=json.dumps({"counter": "c", "attributes": attributes}),
    )

    assert response.status_code == 400, response.body
    assert "empty name" in json.loads(response.body)["Message"]
    assert aws.dynamodb.scan(TableName=Settings().events_table)["Items"] == []


def test_given_event_with_dimensions_and_values_when_posted_then_stored_on_the_item(
    client: Any, aws: Any, clock: Any
) -> None:
    body = {"counter": "jobs", "dimensions": {"provider": "p:2", "region": "eu"}, "values": {"amount": 12.5, "n": 3}}
    response = post(client, body)
    assert response.status_code == 201
    (item,) = stored_events(aws)
    assert item["dimensions"] == {"M": {"provider": {"S": "p:2"}, "region": {"S": "eu"}}}
    assert item["values"] == {"M": {"amount": {"N": "12.5"}, "n": {"N": "3"}}}
    post(client, {"counter": "plain"})
    plain = next(i for i in stored_events(aws) if i["counter"]["S"] == "plain")
    assert "dimensions" not in plain and "values" not in plain


def test_given_bad_dimensions_or_values_in_a_batch_when_posted_then_400_names_the_field_and_nothing_written(
    client: Any, aws: Any, clock: Any
) -> None:
    cases = [
        ({"provider": "x" * 129}, None, "events[1].dimensions.provider"),
        ({f"d{i}": "v" for i in range(5)}, None, "events[1].dimensions"),
        ({"a:b": "v"}, None, "events[1].dimensions"),
        (None, {"amount": "12"}, "events[1].values.amount"),
        (None, {f"v{i}": 1 for i in range(9)}, "events[1].values"),
        (None, {"amount": 1e300}, "events[1].values.amount"),
    ]
    for dims, values, named in cases:
        bad: dict[str, Any] = {"counter": "jobs"}
        if dims is not None:
            bad["dimensions"] = dims
        if values is not None:
            bad["values"] = values
        response = post(client, {"events": [{"counter": "jobs"}, bad]})
        assert response.status_code == 400, (dims, values)
        assert named in response.json_body["Message"]
    assert stored_events(aws) == []
