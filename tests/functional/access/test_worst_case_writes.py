"""What one admitted request of an ingest route can cost in writes: measured for the table of
docs/access.md ("Worst-case writes per request"), each asserted under the bound stated there."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chalicelib.events import dimensions, ingest
from tests.conftest import create_key
from tests.functional import stream_fixtures, work_meter
from tests.functional.helpers import invoke

ITEM_WRITES = {"put_item", "update_item", "transact_write_items", "batch_write_item"}
# The bound docs/access.md states for one event counted alone (per event of a request).
EVENT_WRITES_BOUND = 35


def worst_event(i: int) -> dict[str, Any]:
    """An event that shares nothing with the others: its own counter, every dimension and value
    it may have, a client id."""
    names = [f"d{n}" for n in range(dimensions.MAX_DIMENSIONS)]
    return {
        "counter": f"worst.c{i}",
        "id": f"id-{i}",
        "dimensions": {name: f"v{i}-{name}" for name in names},
        "values": {f"s{n}": n + 1 for n in range(dimensions.MAX_VALUES)},
    }


def test_given_a_request_of_the_most_events_that_share_nothing_when_counted_then_its_writes_are_within_the_stated_bound(
    client: Any, aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = client.http.with_key(create_key(aws, ["ingest"]))
    body = json.dumps({"events": [worst_event(i) for i in range(ingest.MAX_BATCH)]}).encode()

    meter = work_meter.install(aws, monkeypatch)
    assert writer.post("/events", headers={"Content-Type": "application/json"}, body=body).status_code == 201
    at_route = [w for w in meter.writes if w in ITEM_WRITES]
    meter.reset()
    invoke(client, "on_event_records", stream_fixtures.lambda_event(stream_fixtures.stored_event_records(aws.dynamodb)))
    counting = [w for w in meter.writes if w in ITEM_WRITES]

    per_event = len(counting) / ingest.MAX_BATCH
    print(f"\nPOST /events of {ingest.MAX_BATCH} worst-case events: {len(at_route)} write calls at the route, "
          f"{len(counting)} item writes counting them ({per_event:.1f} an event)")  # fmt: skip
    assert at_route == ["batch_write_item"]
    assert per_event <= EVENT_WRITES_BOUND
