"""POST/GET /views and the view queue handler on moto, under Lambda's at-least-once delivery."""

from __future__ import annotations

import itertools
import json
import random
import threading
from collections import defaultdict
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chalicelib.core import queues, times, window_params
from chalicelib.core.settings import Settings
from chalicelib.core.timebuckets import Bucket
from chalicelib.views import api as views_api
from chalicelib.views import batches as views_batches
from chalicelib.views import layout as view_keys
from chalicelib.views import markers, rollup, windows
from chalicelib.views.layout import url_pk
from chalicelib.views.messages import to_message
from chalicelib.views.validation import View
from tests.fakes import Killed, recording
from tests.functional import work_meter
from tests.functional.helpers import deliver, post_all, queue_url, receive_all

T0 = 1_795_000_000_000
SETTINGS = Settings()


# -- helpers ----------------------------------------------------------------------------------


def post(client: Any, body: Any) -> Any:
    return client.http.post("/views", headers={"Content-Type": "application/json"}, body=json.dumps(body))


def views_of(client: Any, url: str, **params: Any) -> Any:
    from urllib.parse import urlencode

    response = client.http.get("/views?" + urlencode({"url": url, **params}))
    assert response.status_code == 200, response.body
    return response.json_body["views"]


def workload(rng: random.Random, n: int, urls: int, spread_ms: int = 0) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """n view bodies over a few URLs, about a tenth of them repeats; and the distinct count per
    URL. With spread_ms, the views' times are spread over that long before T0."""
    bodies: list[dict[str, Any]] = []
    for i in range(n):
        if bodies and rng.random() < 0.1:
            bodies.append(dict(rng.choice(bodies)))
        else:
            bodies.append(
                {
                    "url": f"https://blog.example/{rng.randrange(urls)}",
                    "time": T0 - rng.randrange(spread_ms) if spread_ms else T0 + i * 1000,
                    "clientId": f"c{rng.randrange(20)}",
                }
            )
    distinct: dict[str, set[tuple[Any, ...]]] = defaultdict(set)
    for b in bodies:
        distinct[b["url"]].add((b["time"], b["clientId"]))
    return bodies, {url: len(keys) for url, keys in distinct.items()}


def in_queue(aws: Any, name: str = SETTINGS.views_queue) -> int:
    """Messages still in the queue, visible or not: what was not deleted."""
    attributes = aws.sqs.get_queue_attributes(
        QueueUrl=queue_url(aws, name),
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def in_range(bodies: list[dict[str, Any]], url: str, start_ms: int, end_ms: int) -> int:
    """Brute force: the distinct views of url in the minutes from floor(start) to floor(end)."""
    first, last = start_ms // 60_000, end_ms // 60_000
    return len({(b["time"], b["clientId"]) for b in bodies if b["url"] == url and first <= b["time"] // 60_000 <= last})


def assert_ranges_exact(client: Any, bodies: list[dict[str, Any]], rng: random.Random, ranges: int = 6) -> None:
    """Ranged counts of every URL equal the brute-force count: the range of all views, each of
    their days, and random ranges between the views' times (minute, hour and day edges alike)."""
    times = sorted(b["time"] for b in bodies)
    low, high = times[0] - 3_600_000, times[-1] + 3_600_000
    chosen = [(times[0], times[-1])]
    chosen += [(day, day + 86_399_999) for day in sorted({t - t % 86_400_000 for t in times})]
    chosen += [tuple(sorted((rng.randrange(low, high), rng.randrange(low, high)))) for _ in range(ranges)]
    for url in sorted({b["url"] for b in bodies}):
        for start, end in chosen:
            answer = views_answer(client, url, start=start, end=end)
            assert answer["views"] == in_range(bodies, url, start, end), (url, start, end)
            assert answer["complete"] is True


def views_answer(client: Any, url: str, **params: Any) -> Any:
    from urllib.parse import urlencode

    response = client.http.get("/views?" + urlencode({"url": url, **params}))
    assert response.status_code == 200, response.body
    return response.json_body


class FailingDynamoDB:
    """The real client, except that chosen calls fail the way DynamoDB or Lambda can. The calls
    chosen are the writes of view counters (UpdateItem of a URL's `TOTAL` item)."""

    def __init__(
        self,
        real: Any,
        throttled_url: str | None = None,
        crash_at: int | None = None,
        conflicts: int = 0,
        blind_reads: bool = False,
        refused_view: View | None = None,
        unreachable: bool = False,
    ) -> None:
        self.unreachable = unreachable
        refused_sk = None if refused_view is None else view_keys.marker_sk(refused_view, "event")
        self.refused_token = None if refused_sk is None else markers.token(refused_sk)
        self.real = real
        self.throttled_pk = None if throttled_url is None else url_pk(throttled_url)
        self.crash_at = crash_at
        self.conflicts = conflicts
        self.blind_reads = blind_reads
        self.counts = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def batch_get_item(self, **kwargs: Any) -> Any:
        response = self.real.batch_get_item(**kwargs)
        if self.blind_reads:  # the counters' read, as if the views were counted after it
            for table, items in response.get("Responses", {}).items():
                response["Responses"][table] = [i for i in items if i["sk"]["S"] != view_keys.COUNTER_SK]
        return response

    def update_item(self, **kwargs: Any) -> Any:
        if kwargs["Key"]["sk"]["S"] != view_keys.COUNTER_SK:
            return self.real.update_item(**kwargs)
        self.counts += 1
        if self.counts == self.crash_at:
            raise Killed("Lambda timed out")
        if self.unreachable:
            raise EndpointConnectionError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")
        if self.refused_token and {"B": self.refused_token} in kwargs["ExpressionAttributeValues"].values():
            raise ClientError({"Error": {"Code": "ValidationException", "Message": "refused"}}, "UpdateItem")
        if self.throttled_pk and kwargs["Key"]["pk"]["S"] == self.throttled_pk:
            raise ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}, "UpdateItem"
            )
        if self.conflicts:
            self.conflicts -= 1
            raise ClientError({"Error": {"Code": "TransactionConflictException", "Message": "busy"}}, "UpdateItem")
        return self.real.update_item(**kwargs)


class OneCallAtATime:
    """Each DynamoDB call atomic, as the service is; moto's in-process backend is not thread-safe.
    Calls of different threads still interleave, so a marker can appear between a thread's read
    and its transaction."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.real, name)

        def call(**kwargs: Any) -> Any:
            with self.lock:
                return method(**kwargs)

        return call


# -- the API ----------------------------------------------------------------------------------


def test_given_one_view_when_posted_then_202_and_one_message_queued(client: Any, aws: Any, clock: Any) -> None:
    response = post(
        client, {"url": "https://blog.example/a", "time": times.iso(clock.now - 3_600_000), "clientId": "c1"}
    )
    assert response.status_code == 202
    assert response.json_body == {"accepted": True}
    (message,) = receive_all(aws)
    assert json.loads(message["Body"]) == {
        "url": "https://blog.example/a",
        "time": clock.now - 3_600_000,
        "clientId": "c1",
    }


def test_given_batch_of_25_when_posted_then_25_messages(client: Any, aws: Any, clock: Any) -> None:
    bodies = [{"url": "u", "time": T0 + i, "clientId": "c"} for i in range(25)]
    assert post(client, {"views": bodies}).status_code == 202
    assert len(receive_all(aws)) == 25


def test_given_batch_with_one_bad_view_when_posted_then_400_names_it_and_nothing_queued(
    client: Any, aws: Any, clock: Any
) -> None:
    bodies = [{"url": "u", "time": T0, "clientId": "c"}, {"url": "u", "time": "noon", "clientId": "c"}]
    response = post(client, {"views": bodies})
    assert response.status_code == 400
    assert set(response.json_body) == {"Code", "Message"}
    assert "views[1].time" in response.json_body["Message"]
    response = client.http.post("/views", headers={"Content-Type": "application/json"}, body="{nope")
    assert response.status_code == 400
    assert receive_all(aws) == []


def test_given_text_that_cannot_be_encoded_when_posted_then_400_names_the_field_and_nothing_queued(
    client: Any, aws: Any, clock: Any
) -> None:
    good = '{"url": "u", "time": %d, "clientId": "c"}' % T0
    for field, bad in [("clientId", '"\\udc00x"'), ("url", '"https://blog.example/\\ud800"')]:
        body = good.replace(f'"{field}": "{"c" if field == "clientId" else "u"}"', f'"{field}": {bad}')
        assert body != good
        response = client.http.post("/views", headers={"Content-Type": "application/json"}, body=body)
        assert response.status_code == 400, body
        assert set(response.json_body) == {"Code", "Message"}
        assert field in response.json_body["Message"] and "surrogate" in response.json_body["Message"]
    assert receive_all(aws) == []


def test_given_queue_unavailable_when_posted_then_503_in_error_shape(
    client: Any, aws: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(**kwargs: Any) -> Any:
        raise ClientError({"Error": {"Code": "InternalError", "Message": "down"}}, "SendMessageBatch")

    monkeypatch.setattr(aws.sqs, "send_message_batch", refuse)
    response = post(client, {"url": "u", "time": T0, "clientId": "c"})
    assert response.status_code == 503
    assert set(response.json_body) == {"Code", "Message"}


def test_given_unknown_url_when_read_then_zero(client: Any, clock: Any) -> None:
    assert views_of(client, "https://nowhere.example/") == 0


def test_given_bad_read_parameters_when_read_then_400(client: Any, clock: Any) -> None:
    for path in [
        "/views",
        "/views?url=a&start=noon",
        "/views?url=a&start=1795000060000&end=1795000000000",
        "/views?url=a&window=401d",
        "/views?url=a&window=7d&start=1795000000000",
        "/views?url=a&window=0m",
        "/views?url=a&start=2000-01-01T00:00:00Z&end=2099-12-31T00:00:00Z",
    ]:
        response = client.http.get(path)
        assert response.status_code == 400, path
        assert set(response.json_body) == {"Code", "Message"}


# -- exactly once -----------------------------------------------------------------------------


@pytest.fixture(params=[1024, 160], ids=["kilobyte", "spilling-often"])
def unit_bytes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """The write unit the counters are kept under: DynamoDB's, or one so small that a counter
    spills its markers at every count."""
    monkeypatch.setattr(markers, "WRITE_UNIT_BYTES", request.param)
    return int(request.param)


def test_given_every_message_delivered_three_times_shuffled_and_concurrently_then_counts_exact(
    client: Any,
    aws: Any,
    app_module: Any,
    clock: Any,
    slept: list[float],
    monkeypatch: pytest.MonkeyPatch,
    unit_bytes: int,
) -> None:
    """With a write unit of 160 bytes, counters spill their markers every few views, so spills
    race counts of the same URL in other threads, and duplicates are found in spilled items."""
    rng = random.Random(7)
    bodies, expected = workload(rng, 150, urls=6, spread_ms=3 * 86_400_000)
    post_all(client, bodies)
    messages = receive_all(aws)
    assert len(messages) == len(bodies)
    deliveries = messages * 3
    rng.shuffle(deliveries)
    batches = []
    while deliveries:
        size = rng.randint(1, 40)
        batches.append(deliveries[:size])
        deliveries = deliveries[size:]
    half = len(batches) // 2
    monkeypatch.setattr(aws, "dynamodb", OneCallAtATime(aws.dynamodb))
    for batch in batches[:half]:
        deliver(client, batch)
    errors: list[BaseException] = []

    def worker(mine: list[list[dict[str, Any]]]) -> None:
        try:
            for batch in mine:
                deliver(client, batch)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(batches[half + i :: 4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for url, n in expected.items():
        assert views_of(client, url) == n, url
    assert_ranges_exact(client, bodies, rng)
    spilled = aws.dynamodb.scan(
        TableName=SETTINGS.counts_table,
        FilterExpression="begins_with(sk, :k)",
        ExpressionAttributeValues={":k": {"S": markers.SPILLED_PREFIX}},
    )["Items"]
    assert (len(spilled) > 100) == (unit_bytes < 1024), len(spilled)


def test_given_batch_fails_half_way_when_redelivered_then_exact_and_done_messages_left_the_queue(
    client: Any, aws: Any, app_module: Any, clock: Any, slept: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(views_batches, "MAX_UPDATE_VIEWS", 4)  # several updates per URL
    bodies, expected = workload(random.Random(3), 60, urls=5, spread_ms=2 * 86_400_000)
    post_all(client, bodies)
    messages = receive_all(aws)
    failing = FailingDynamoDB(aws.dynamodb, throttled_url="https://blog.example/2")
    monkeypatch.setattr(aws, "dynamodb", failing)
    with pytest.raises(views_batches.BatchIncompleteError):
        deliver(client, messages)
    assert 0 < in_queue(aws) < len(messages), "counted messages are deleted, the failed ones stay"
    monkeypatch.setattr(aws, "dynamodb", failing.real)
    deliver(client, messages)  # Lambda's redelivery carries the whole batch again
    for url, n in expected.items():
        assert views_of(client, url) == n, url
    deliver(client, messages)  # and once more, after it was counted
    for url, n in expected.items():
        assert views_of(client, url) == n, url
    assert_ranges_exact(client, bodies, random.Random(3))


@pytest.mark.parametrize("crash_at", [3, 4, 5, 6])
def test_given_handler_dies_between_counter_updates_when_batch_redelivered_then_exact(
    client: Any,
    aws: Any,
    app_module: Any,
    clock: Any,
    slept: list[float],
    monkeypatch: pytest.MonkeyPatch,
    unit_bytes: int,
    crash_at: int,
) -> None:
    """Spilling at every count, the handler dies in a count or in a spill's update."""
    monkeypatch.setattr(views_batches, "MAX_UPDATE_VIEWS", 4)
    bodies, expected = workload(random.Random(5), 60, urls=5, spread_ms=2 * 86_400_000)
    post_all(client, bodies)
    messages = receive_all(aws)
    monkeypatch.setattr(aws, "dynamodb", FailingDynamoDB(aws.dynamodb, crash_at=crash_at))
    with pytest.raises(Killed):
        deliver(client, messages)
    assert sum(views_of(client, url) for url in expected) > 0, "the first updates were applied"
    monkeypatch.setattr(aws, "dynamodb", aws.dynamodb.real)
    random.Random(1).shuffle(messages)
    deliver(client, messages)
    for url, n in expected.items():
        assert views_of(client, url) == n, url
    assert_ranges_exact(client, bodies, random.Random(5))


def test_given_views_counted_after_the_read_when_counting_then_exactly_the_duplicates_dropped(
    client: Any, aws: Any, app_module: Any, clock: Any, slept: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = [{"url": f"u{i % 3}", "time": T0 + i, "clientId": "c"} for i in range(12)]
    post_all(client, first)
    deliver(client, receive_all(aws))
    second = first[::2] + [{"url": f"u{i % 3}", "time": T0 + 100 + i, "clientId": "c"} for i in range(5)]
    post_all(client, second)
    blind = FailingDynamoDB(aws.dynamodb, blind_reads=True)
    monkeypatch.setattr(aws, "dynamodb", blind)
    result = deliver(client, receive_all(aws))
    assert result["duplicates"] == 6 and result["counted"] == 5
    monkeypatch.setattr(aws, "dynamodb", blind.real)
    assert sum(views_of(client, f"u{i}") for i in range(3)) == 17
    assert_ranges_exact(client, first + second, random.Random(2))


def test_given_counter_held_by_a_transaction_when_applied_then_retried_with_backoff_and_exact(
    client: Any, aws: Any, app_module: Any, clock: Any, slept: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    post_all(client, [{"url": "u", "time": T0 + i, "clientId": "c"} for i in range(5)])
    monkeypatch.setattr(aws, "dynamodb", FailingDynamoDB(aws.dynamodb, conflicts=3))
    result = deliver(client, receive_all(aws))
    assert result["counted"] == 5 and result["duplicates"] == 0
    assert len(slept) == 3 and slept == sorted(slept) and slept[0] < slept[-1]
    assert result["retries"] == 3 and result["transactions"] == 4, "each retry reported (TransactionRetries)"
    assert views_of(client, "u") == 5


# -- poison messages --------------------------------------------------------------------------


def test_given_good_views_and_one_poison_of_each_kind_when_delivered_once_then_good_counted_and_each_poison_set_aside(
    client: Any, aws: Any, app_module: Any, clock: Any, slept: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    good = [{"url": f"u{i % 2}", "time": T0 + i, "clientId": f"c{i}"} for i in range(8)]
    post_all(client, good[:4])
    # Each poison message, and what its reason must say. The door refuses all of these; the
    # queue can still carry them (another producer, an older version, a hand-sent message).
    poison = {
        '{"url": "u0", "time": %d, "clientId": "\\udc00x"}' % T0: "not valid text",
        '{"url": "u1", "time": %d, "clientId": "stale"}' % (T0 - SETTINGS.view_horizon_seconds * 1000): "horizon",
        '{"v": 1, "name": "visitors", "hashes": "AAAA"}': "unknown fields",
        '{"url": "u0", "time": %d, "clientId": "refused"}' % T0: "ValidationException",
        "[" * 5000 + "]" * 5000: "nested deeper",
    }
    for body in poison:
        aws.sqs.send_message(QueueUrl=queue_url(aws), MessageBody=body)
    post_all(client, good[4:])
    refused = View("u0", T0, "refused")
    monkeypatch.setattr(aws, "dynamodb", FailingDynamoDB(aws.dynamodb, refused_view=refused))
    messages = receive_all(aws)
    assert len(messages) == len(good) + len(poison)

    result = deliver(client, messages)  # returns: Lambda deletes the batch, nothing is redriven

    assert result["counted"] == len(good) and result["quarantined"] == len(poison) and result["failed"] == 0
    assert [views_of(client, "u0"), views_of(client, "u1")] == [4, 4]
    # The refused view has u0's time: had any of its bucket increments been written, u0's range would be 5.
    assert [views_of(client, u, start=T0 - 60_000, end=T0 + 60_000) for u in ("u0", "u1")] == [4, 4]
    dead = receive_all(aws, f"{SETTINGS.views_queue}-dlq")
    reasons = {m["Body"]: m["MessageAttributes"]["reason"]["StringValue"] for m in dead}
    assert len(dead) == len(poison) and set(reasons) == set(poison), "each poison message set aside once"
    for body, expected in poison.items():
        assert expected in reasons[body], (body[:60], reasons[body])

    again = deliver(client, messages)  # Lambda deleted the batch when the handler returned: a new copy
    assert again["counted"] == 0 and again["duplicates"] == len(good) and again["quarantined"] == len(poison)
    assert [views_of(client, "u0"), views_of(client, "u1")] == [4, 4]
    assert sorted(m["Body"] for m in receive_all(aws, f"{SETTINGS.views_queue}-dlq")) == sorted(poison)


@pytest.mark.parametrize("failure", [{"throttled_url": "u"}, {"unreachable": True}], ids=["throttled", "unreachable"])
def test_given_storage_throttled_or_unreachable_when_applied_then_views_wait_for_redelivery_not_set_aside(
    client: Any,
    aws: Any,
    app_module: Any,
    clock: Any,
    slept: list[float],
    monkeypatch: pytest.MonkeyPatch,
    failure: dict[str, Any],
) -> None:
    post_all(client, [{"url": "u", "time": T0, "clientId": "c"}, {"url": "v", "time": T0, "clientId": "c"}])
    monkeypatch.setattr(aws, "dynamodb", FailingDynamoDB(aws.dynamodb, **failure))
    with pytest.raises(views_batches.BatchIncompleteError):
        deliver(client, receive_all(aws))
    assert receive_all(aws, f"{SETTINGS.views_queue}-dlq") == []
    assert views_of(client, "u") == 0, "a failure not about one view is no view's fault"
    # Each URL is its own write: a throttled URL holds back its own views only.
    waiting = 1 if "throttled_url" in failure else 2
    assert in_queue(aws) == waiting and views_of(client, "v") == 2 - waiting


def test_given_poison_and_a_failing_write_when_applied_then_poison_set_aside_and_removed_before_raising(
    client: Any, aws: Any, app_module: Any, clock: Any, slept: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    post_all(client, [{"url": "u", "time": T0 + i, "clientId": "c"} for i in range(3)])
    aws.sqs.send_message(QueueUrl=queue_url(aws), MessageBody="not json")
    messages = receive_all(aws)
    monkeypatch.setattr(aws, "dynamodb", FailingDynamoDB(aws.dynamodb, throttled_url="u"))
    with pytest.raises(views_batches.BatchIncompleteError):
        deliver(client, messages)
    assert [m["Body"] for m in receive_all(aws, f"{SETTINGS.views_queue}-dlq")] == ["not json"]
    assert in_queue(aws) == 3, "only the views that failed stay in the queue"


# -- ranges -----------------------------------------------------------------------------------


def test_given_views_over_hours_when_range_read_then_the_minutes_from_start_to_end_inclusive_counted(
    client: Any, aws: Any, app_module: Any, clock: Any
) -> None:
    hour = 3_600_000
    first = clock.now - 10 * hour
    post_all(client, [{"url": "u", "time": first + i * hour, "clientId": f"c{i}"} for i in range(10)])
    deliver(client, receive_all(aws))
    assert views_of(client, "u") == 10
    # The minute buckets from floor(start) to floor(end), both included: views 2, 3, 4 and 5.
    assert views_of(client, "u", start=first + 2 * hour, end=first + 5 * hour) == 4
    assert views_of(client, "u", start=first + 2 * hour + 1) == 8, "start is floored to its minute"
    assert views_of(client, "u", start=first + 2 * hour + 60_000) == 7
    assert views_of(client, "u", end=first + hour) == 2, "end alone: the 24 hours up to it"
    # A window of W: the W minutes up to and including now's; the view 5 h ago is one minute before.
    assert views_of(client, "u", window="5h") == 4
    assert views_of(client, "u", window="301m") == 5
    clock.advance(SETTINGS.view_horizon_seconds * 1000 + 1000)
    assert views_of(client, "u", start=first, end=first + 10 * hour) == 10, "buckets outlive the markers"
    assert views_of(client, "u") == 10


def test_given_client_day_policy_when_same_client_views_twice_a_day_then_counted_once(aws: Any, clock: Any) -> None:
    from dataclasses import replace

    settings = replace(SETTINGS, view_dedup="client-day")
    day = [View("u", T0 + i * 60_000, "c") for i in range(3)] + [View("u", T0 + 86_400_000, "c")]
    messages = [queues.Message(str(i), f"r{i}", to_message(v)) for i, v in enumerate(day)]
    result = views_batches.apply_messages(aws.dynamodb, aws.sqs, settings, messages, clock.now)
    assert result.counted == 2
    assert views_api.count(aws.dynamodb, settings, "u", None, clock.now)["views"] == 2
    minutes = window_params.minute_range({"start": str(T0), "end": str(T0 + 86_400_000)}, clock.now)
    in_range = views_api.count(aws.dynamodb, settings, "u", minutes, clock.now)
    assert in_range["views"] == 2, "each client-day counted at its first view's time"


_examples = itertools.count()


def test_given_views_spread_over_hours_and_days_when_any_range_read_then_equal_to_counting_the_views(
    client: Any, aws: Any, app_module: Any, clock: Any
) -> None:
    hour, day = 3_600_000, 86_400_000

    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        st.lists(
            st.tuples(st.integers(0, 18 * day), st.sampled_from(["a", "b", "c"])),  # within the 19-day horizon
            min_size=1,
            max_size=40,
        ),
        st.lists(st.tuples(st.integers(-hour, 19 * day), st.integers(0, 19 * day)), min_size=1, max_size=5),
    )
    def check(views: list[tuple[int, str]], ranges: list[tuple[int, int]]) -> None:
        url = f"https://blog.example/ranges/{next(_examples)}"
        bodies = [{"url": url, "time": clock.now - back, "clientId": who} for back, who in views]
        post_all(client, bodies + bodies[:3])  # a client's retries too
        deliver(client, receive_all(aws))
        for ago, length in ranges:
            start = clock.now - ago
            end = min(start + length, clock.now)
            if end < start:
                continue
            answer = views_answer(client, url, start=start, end=end)
            assert answer["views"] == in_range(bodies, url, start, end), (start, end)
            assert answer["start"] == times.iso(start - start % 60_000)
            assert answer["end"] == times.iso(end - end % 60_000 + 60_000)
            assert answer["complete"] is True and answer["keys_read"] <= windows.MAX_PARTS

    check()


def test_given_urls_with_10_and_300_views_when_a_week_is_read_then_the_same_few_keys_in_one_call(
    client: Any, aws: Any, app_module: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for url, n in (("small", 10), ("large", 300)):  # the large one in every hour of the week
        post_all(client, [{"url": url, "time": clock.now - i * 1_980_000, "clientId": f"c{i}"} for i in range(n)])
        deliver(client, receive_all(aws))
    work = work_meter.install(aws, monkeypatch)
    reads: list[dict[str, Any]] = []
    monkeypatch.setattr(aws, "dynamodb", recording(aws.dynamodb, "batch_get_item", reads))
    answers = {}
    for url in ("small", "large"):
        work.reset()
        answers[url] = views_answer(client, url, window="7d")
        assert work.calls == ["batch_get_item"], "one BatchGetItem, no Query"
    assert answers["small"]["views"] == 10 and answers["large"]["views"] == 300
    keys = [len(request["Keys"]) for call in reads for request in call["RequestItems"].values()]
    assert len(keys) == 2 and keys[0] == keys[1] == answers["large"]["keys_read"] <= views_api.MAX_KEYS
    work.reset()
    longest = views_answer(client, "large", window=f"{windows.MAX_RANGE_DAYS}d")
    assert longest["views"] == 300 and work.calls == ["batch_get_item"]
    assert len(reads[-1]["RequestItems"][SETTINGS.counts_table]["Keys"]) == longest["keys_read"] <= views_api.MAX_KEYS


def test_given_buckets_past_their_retention_when_read_then_they_count_0_and_the_answer_says_from_when_it_counts(
    client: Any, aws: Any, app_module: Any, clock: Any
) -> None:
    hour, day = 3_600_000, 86_400_000
    bodies = [{"url": "u", "time": clock.now - i * 5 * hour, "clientId": "c"} for i in range(60)]  # 12.5 days
    post_all(client, bodies)
    deliver(client, receive_all(aws))
    start, end = clock.now - 13 * day, clock.now
    assert views_answer(client, "u", start=start, end=end)["views"] == 60
    retention_ms = app_module.settings.view_bucket_retention_seconds * 1000
    clock.advance(retention_ms - 6 * day)  # the oldest views' hours, days and maybe blocks are gone
    answer = views_answer(client, "u", start=start, end=end)
    assert answer["complete"] is False
    kept_from = times.parse(answer["retained_from"], "retained_from")
    assert start < kept_from <= end + 60_000
    assert answer["views"] == in_range(bodies, "u", kept_from, end), "exactly the views from retained_from"
    clock.advance(60 * day)  # every bucket, blocks included, is past its retention
    gone = views_answer(client, "u", start=start, end=end)
    assert gone["views"] == 0 and gone["complete"] is False
    assert views_of(client, "u") == 60, "the all-time counter does not expire"


def test_given_a_fault_in_the_code_on_a_storage_call_when_applied_then_views_wait_for_redelivery_not_set_aside(
    client: Any, aws: Any, app_module: Any, clock: Any, slept: list[float]
) -> None:
    bodies = [{"url": f"u{i % 2}", "time": T0 + i, "clientId": "c"} for i in range(6)]
    post_all(client, bodies)
    messages = receive_all(aws)

    def fault(**_: Any) -> None:  # not about any view: a bug, a bad deploy
        raise KeyError("UpdateExpression")

    events = aws.dynamodb.meta.events
    events.register("before-call.dynamodb.UpdateItem", fault)
    try:
        with pytest.raises(views_batches.BatchIncompleteError) as raised:
            deliver(client, messages)
    finally:
        events.unregister("before-call.dynamodb.UpdateItem", fault)
    assert isinstance(raised.value.__cause__, KeyError)
    assert receive_all(aws, f"{SETTINGS.views_queue}-dlq") == [], "no view was at fault"
    assert in_queue(aws) == 6 and views_of(client, "u0") == 0
    result = deliver(client, messages)  # SQS delivers them again once the fault is gone
    assert result["counted"] == 6 and result["quarantined"] == 0
    assert [views_of(client, "u0"), views_of(client, "u1")] == [3, 3]


# -- the horizon: a view is counted at most once, however it comes back -----------------------


def test_given_a_view_older_than_the_horizon_or_too_far_ahead_when_posted_then_400_says_so_and_nothing_queued(
    client: Any, aws: Any, clock: Any
) -> None:
    horizon_ms = SETTINGS.view_horizon_seconds * 1000
    stale = {"url": "u", "time": clock.now - horizon_ms, "clientId": "c"}
    response = post(client, {"views": [{"url": "u", "time": clock.now, "clientId": "c"}, stale]})
    assert response.status_code == 400
    assert "views[1].time" in response.json_body["Message"] and "horizon" in response.json_body["Message"]
    ahead = post(
        client, {"url": "u", "time": clock.now + SETTINGS.max_future_skew_seconds * 1000 + 1000, "clientId": "c"}
    )
    assert ahead.status_code == 400 and "future" in ahead.json_body["Message"]
    assert receive_all(aws) == []
    assert post(client, {"url": "u", "time": clock.now - horizon_ms + 1000, "clientId": "c"}).status_code == 202


def redrive(aws: Any, bodies: list[str]) -> list[dict[str, Any]]:
    """The views sent again as new messages, as a redrive from the dead-letter queue does
    ("redriven messages are considered new messages"), and received."""
    for text in bodies:
        aws.sqs.send_message(QueueUrl=queue_url(aws), MessageBody=text)
    return receive_all(aws)


def test_given_a_counted_view_when_redriven_within_the_horizon_then_counted_once(
    client: Any, aws: Any, app_module: Any, clock: Any
) -> None:
    post_all(client, [{"url": "u", "time": clock.now - 3_600_000, "clientId": f"c{i}"} for i in range(3)])
    messages = receive_all(aws)
    assert deliver(client, messages)["counted"] == 3
    # 18 days on: past the main queue's 4 days and a week, and the markers are still there.
    clock.advance(SETTINGS.view_horizon_seconds * 1000 - 3_600_000 - 60_000)
    result = deliver(client, redrive(aws, [m["Body"] for m in messages]))
    assert result["duplicates"] == 3 and result["counted"] == 0 and result["quarantined"] == 0
    assert views_of(client, "u") == 3


def test_given_a_counted_view_when_redriven_past_the_horizon_then_set_aside_not_counted(
    client: Any, aws: Any, app_module: Any, clock: Any
) -> None:
    view_time = clock.now - 3_600_000
    post_all(client, [{"url": "u", "time": view_time, "clientId": "c"}])
    messages = receive_all(aws)
    assert deliver(client, messages)["counted"] == 1
    clock.now = view_time + SETTINGS.view_horizon_seconds * 1000  # its marker may be gone now
    result = deliver(client, redrive(aws, [m["Body"] for m in messages]))
    assert result["quarantined"] == 1 and result["counted"] == 0
    assert views_of(client, "u") == 1
    (dead,) = receive_all(aws, f"{SETTINGS.views_queue}-dlq")
    assert dead["Body"] == messages[0]["Body"] and "horizon" in dead["MessageAttributes"]["reason"]["StringValue"]


def test_given_handler_dies_between_two_moves_of_pending_minutes_when_redelivered_then_ranges_exact_throughout(
    client: Any, aws: Any, app_module: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    minute = 60_000
    # u0 gets 130 views in 130 minutes over six days: more pending minutes than one move takes.
    bodies = [{"url": "u0", "time": clock.now - i * 61 * minute, "clientId": f"c{i}"} for i in range(130)]
    bodies += [{"url": f"u{1 + i % 2}", "time": clock.now - i * 7 * minute, "clientId": f"d{i}"} for i in range(10)]
    post_all(client, bodies)
    messages = receive_all(aws)
    real = rollup.move
    moves: list[int] = []

    def dies_on_the_second_move(*args: Any) -> Any:
        moves.append(1)
        if len(moves) == 2:
            raise Killed("Lambda timed out")
        return real(*args)

    monkeypatch.setattr(rollup, "move", dies_on_the_second_move)
    with pytest.raises(Killed):
        deliver(client, messages)
    monkeypatch.setattr(rollup, "move", real)
    assert sum(views_of(client, f"u{i}") for i in range(3)) == 140
    assert_ranges_exact(client, bodies, random.Random(5))  # one move done: buckets and pending add up
    again = deliver(client, messages)  # the whole batch comes back: every view a duplicate
    assert again["duplicates"] == 140 and again["counted"] == 0 and again["bucket_moves"] >= 1
    assert_ranges_exact(client, bodies, random.Random(6))
    counter = aws.dynamodb.get_item(TableName=SETTINGS.counts_table, Key=view_keys.counter_key("u0"))["Item"]
    assert len(view_keys.pending_minutes(counter)) <= rollup.FLUSH_AT, "moved on redelivery"


def test_given_a_counter_counted_into_after_it_was_read_when_moved_then_nothing_moves_and_counts_stay_exact(
    client: Any, aws: Any, clock: Any
) -> None:
    minute = 60_000
    bodies = [{"url": "u", "time": clock.now - i * minute, "clientId": f"c{i}"} for i in range(10)]
    post_all(client, bodies)
    deliver(client, receive_all(aws))
    pk, key = url_pk("u"), view_keys.counter_key("u")
    stale = aws.dynamodb.get_item(TableName=SETTINGS.counts_table, Key=key, ConsistentRead=True)["Item"]
    late = {"url": "u", "time": clock.now - 30 * minute, "clientId": "late"}
    post_all(client, [late])
    deliver(client, receive_all(aws))
    assert rollup.move(aws.dynamodb, SETTINGS, pk, stale, clock.now) is False, "the late view would be lost"
    assert_ranges_exact(client, bodies + [late], random.Random(7))
    fresh = aws.dynamodb.get_item(TableName=SETTINGS.counts_table, Key=key, ConsistentRead=True)["Item"]
    assert rollup.move(aws.dynamodb, SETTINGS, pk, fresh, clock.now) is True
    assert rollup.move(aws.dynamodb, SETTINGS, pk, fresh, clock.now) is False, "a move happens once"
    assert_ranges_exact(client, bodies + [late], random.Random(8))


def test_given_a_move_between_reading_the_counter_and_its_buckets_when_read_then_read_again_not_counted_twice(
    client: Any, aws: Any, clock: Any
) -> None:
    hour = 3_600_000
    bodies = [{"url": "u", "time": clock.now - i * 61_000, "clientId": f"c{i}"} for i in range(10)]
    pk, key = url_pk("u"), view_keys.counter_key("u")
    post_all(client, bodies[:5])
    deliver(client, receive_all(aws))
    first = aws.dynamodb.get_item(TableName=SETTINGS.counts_table, Key=key, ConsistentRead=True)["Item"]
    assert rollup.never_moved(first), "its count is its pending minutes: no bucket is read"
    assert rollup.move(aws.dynamodb, SETTINGS, pk, first, clock.now) is True  # buckets from now on
    post_all(client, bodies[5:])
    deliver(client, receive_all(aws))
    before = aws.dynamodb.get_item(TableName=SETTINGS.counts_table, Key=key, ConsistentRead=True)["Item"]
    assert not rollup.never_moved(before)
    assert rollup.move(aws.dynamodb, SETTINGS, pk, before, clock.now) is True  # after the counter was read
    spans = rollup.enclosing([Bucket("hour", (clock.now - i * hour) // hour) for i in range(2)])
    stored = rollup.read(aws.dynamodb, SETTINGS, {pk: spans}, ordered=True, counters={pk: before})[pk]
    assert stored.counter != before, "read again"
    for span in spans:
        expected = in_range(bodies, "u", span.first_minute * 60_000, span.end_ms - 1)
        assert stored.count(SETTINGS, span, clock.now) == expected
        stale = rollup.Stored(before, stored.buckets)
        again = in_range(bodies[5:], "u", span.first_minute * 60_000, span.end_ms - 1)
        assert stale.count(SETTINGS, span, clock.now) == expected + again, "what the check prevents"
