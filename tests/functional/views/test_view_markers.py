"""View markers on the counter (chalicelib.views.markers) on moto: spills, races with a spill,
a handler dying inside one, and the counter's size."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest

from chalicelib.core import dynamo, item_sizes
from chalicelib.core.settings import Settings
from chalicelib.views import catalog, markers
from chalicelib.views import layout as view_keys
from chalicelib.views.validation import View
from tests.fakes import Forwarding, Killed
from tests.functional.helpers import deliver, post_all, receive_all

T0 = 1_795_000_000_000
SETTINGS = Settings()
URL = "https://blog.example/post"
PK = view_keys.url_pk(URL)


def views_of(client: Any, url: str = URL) -> int:
    response = client.http.get("/views?" + urlencode({"url": url}))
    assert response.status_code == 200, response.body
    return int(response.json_body["views"])


def bodies(first: int, n: int) -> list[dict[str, Any]]:
    return [{"url": URL, "time": T0 + i * 1000, "clientId": f"c{i}"} for i in range(first, first + n)]


def counter(aws: Any) -> dict[str, Any]:
    item = aws.dynamodb.get_item(TableName=SETTINGS.counts_table, Key=view_keys.counter_key(URL), ConsistentRead=True)
    return dict(item["Item"])


def spilled(aws: Any) -> set[str]:
    items = aws.dynamodb.query(
        TableName=SETTINGS.counts_table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :k)",
        ExpressionAttributeValues={":pk": {"S": PK}, ":k": {"S": markers.SPILLED_PREFIX}},
    )["Items"]
    return {i["sk"]["S"] for i in items}


def count(client: Any, aws: Any, views: list[dict[str, Any]]) -> Any:
    post_all(client, views)
    return deliver(client, receive_all(aws))


def test_given_a_url_viewed_in_many_batches_when_counted_then_its_counter_stays_under_a_kilobyte_and_markers_spill(
    client: Any, aws: Any, app_module: Any, clock: Any
) -> None:
    clock.now = T0 + 600_000
    sizes = []
    for batch in range(20):
        count(client, aws, bodies(batch * 10, 10))
        sizes.append(item_sizes.item_size(counter(aws)))
    assert max(sizes) <= 1024, sizes
    assert counter(aws).get(markers.SPILLS), "the counter spilled its markers"
    assert len(spilled(aws)) + sum(len(t) for t in markers.inline(counter(aws)).values()) == 200
    again = count(client, aws, bodies(0, 200))  # every view again: spilled or inline, each found
    assert again["counted"] == 0 and again["duplicates"] == 200
    assert views_of(client) == 200


class CountsAndSpillsFirst(Forwarding):
    """After this handler read the URL's counter and before its count, another handler counts a
    view (`view`) and then spills the counter's markers, that view's among them."""

    def __init__(self, real: Any, now_ms: int, view: View) -> None:
        super().__init__(real)
        self.now_ms, self.view, self.done = now_ms, view, False

    def _counter(self) -> dict[str, Any]:
        stored = self.real.get_item(
            TableName=SETTINGS.counts_table, Key=view_keys.counter_key(URL), ConsistentRead=True
        )
        return dict(stored["Item"])

    def update_item(self, **request: Any) -> Any:
        if not self.done and request["Key"] == view_keys.counter_key(URL) and "ADD" in request["UpdateExpression"]:
            self.done = True
            sk = view_keys.marker_sk(self.view, SETTINGS.view_dedup)
            marked = markers.Marked(markers.token(sk), markers.marker_day(self.view.time_ms), None)
            names = {"last_counted": catalog.LAST_COUNTED, "listed": catalog.LISTED}
            other = markers.count_request(
                SETTINGS.counts_table,
                PK,
                URL,
                self._counter(),
                [marked],
                self.now_ms,
                SETTINGS.view_horizon_seconds,
                **names,
            )
            self.real.update_item(**other)
            plan = markers.spill(SETTINGS.counts_table, PK, self._counter(), SETTINGS.view_horizon_seconds, self.now_ms)
            assert plan is not None
            dynamo.put_items(self.real, SETTINGS.counts_table, plan.items, "spill")
            self.real.update_item(**plan.update)
        return self.real.update_item(**request)


def test_given_a_view_counted_and_spilled_between_the_read_and_the_count_when_counted_then_found_in_its_spilled_item(
    client: Any, aws: Any, app_module: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The count's condition on `ks` is what catches it: the view is no longer inline when the
    count is written, and was not spilled yet when the spilled items were read."""
    clock.now = T0 + 600_000
    count(client, aws, bodies(0, 2))
    (again,) = bodies(2, 1)
    racer = CountsAndSpillsFirst(aws.dynamodb, clock.now, View(URL, again["time"], again["clientId"]))
    monkeypatch.setattr(aws, "dynamodb", racer)
    result = count(client, aws, bodies(2, 3))  # c2 counted meanwhile by the other handler
    assert racer.done and result["counted"] == 2 and result["duplicates"] == 1
    monkeypatch.setattr(aws, "dynamodb", racer.real)
    assert views_of(client) == 5 and len(spilled(aws)) == 3


class DiesInSpill(Forwarding):
    """The handler's process ends after a spill wrote its items, before it updated the counter."""

    def update_item(self, **request: Any) -> Any:
        if "DELETE" in request["UpdateExpression"]:
            raise Killed("Lambda timed out")
        return self.real.update_item(**request)


def test_given_a_handler_dying_inside_a_spill_when_redelivered_then_exact_and_the_spill_done_later(
    client: Any, aws: Any, app_module: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock.now = T0 + 600_000
    for batch in range(4):
        count(client, aws, bodies(batch * 10, 10))
    assert not spilled(aws), "not full yet"
    monkeypatch.setattr(aws, "dynamodb", DiesInSpill(aws.dynamodb))
    post_all(client, bodies(40, 40))
    messages = receive_all(aws)
    with pytest.raises(Killed):
        deliver(client, messages)
    monkeypatch.setattr(aws, "dynamodb", aws.dynamodb.real)
    assert spilled(aws) and not counter(aws).get(markers.SPILLS), "items written, the counter untouched"
    result = deliver(client, messages)
    assert result["counted"] == 40
    again = count(client, aws, bodies(0, 80))
    assert again["counted"] == 0 and again["duplicates"] == 80 and views_of(client) == 80


@pytest.mark.parametrize("views", [1, 7, 40])
def test_given_a_count_when_written_then_the_counter_is_as_big_as_predicted(
    client: Any, aws: Any, app_module: Any, clock: Any, views: int
) -> None:
    """size_after, which decides spills, prices the item DynamoDB stores (checked on moto's item
    by item_sizes' published rules)."""
    clock.now = T0 + 600_000
    count(client, aws, bodies(0, 3))
    before = counter(aws)
    new = [View(URL, T0 + i * 1000, f"c{i}") for i in range(3, 3 + views)]
    marked = [
        markers.Marked(
            markers.token(view_keys.marker_sk(v, "event")), markers.marker_day(v.time_ms), v.time_ms // 60_000
        )
        for v in new
    ]
    clock.now += 1
    predicted = markers.size_after(
        before, PK, URL, marked, clock.now, last_counted=catalog.LAST_COUNTED, listed=catalog.LISTED
    )
    count(
        client, aws, [json.loads(json.dumps({"url": v.url, "time": v.time_ms, "clientId": v.client_id})) for v in new]
    )
    if markers.SPILLS not in counter(aws):
        assert item_sizes.item_size(counter(aws)) == predicted
