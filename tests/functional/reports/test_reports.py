"""Scheduled reports on moto: every event in exactly one report, checkpoint safety, the routes."""

from __future__ import annotations

import csv
import io
import random
import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError

from chalicelib.core.errors import StorageError
from chalicelib.core.settings import Settings
from chalicelib.reports import ranges as report_ranges
from chalicelib.reports import runs as reports_runs
from tests.fakes import Patched
from tests.functional.helpers import REPORT_SETTLE, all_reports, assert_each_event_once, invoke, post_events, run_now

MINUTE = 60_000
HOUR = 60 * MINUTE
SETTINGS = Settings()


# A run reports events ingested before now - settle delay: this much later, they are in.
def run_scheduled(client: Any) -> Any:
    event = client.events.generate_cw_event("aws.events", "Scheduled Event", {}, [])
    return invoke(client, "run_scheduled_report", event)


def checkpoint(aws: Any) -> int | None:
    return reports_runs.CHECKPOINT.read(aws.dynamodb, SETTINGS.counts_table)


def test_given_events_over_many_quarter_hours_when_runs_are_irregular_and_one_missed_then_each_event_in_one_report(
    client: Any, aws: Any, clock: Any
) -> None:
    rng = random.Random(7)
    expected: dict[str, int] = {}
    shards_used: set[str] = set()
    # Minutes since the start at which a run happens: irregular, then a 4-hour gap (missed runs).
    runs = {37, 95, 96, 160, 161, 400, 425, 470}
    scheduled = {95, 400}
    for minute in range(0, 481):
        for _ in range(rng.choice([0, 0, 1, 2])):
            n = len(expected)
            expected[f"e{n}"] = n
            post_events(client, [{"counter": f"e{n}", "attributes": {"amount": n, "note": "x"}}])
        if minute in runs:
            answer = run_scheduled(client) if minute in scheduled else run_now(client).json_body
            assert answer["superseded"] is False
        clock.advance(MINUTE)
    clock.advance(REPORT_SETTLE)
    run_now(client)
    for item in aws.dynamodb.scan(TableName=SETTINGS.events_table)["Items"]:
        shards_used.add(item["pk"]["S"].split("#")[1])

    found = all_reports(aws)
    assert len(shards_used) == SETTINGS.event_write_shards
    assert sum(r["events"] for r in found) == len(expected) > 250
    assert_each_event_once(found, expected)
    spans = [report_ranges.parse_report_id(r["id"]) for r in found]
    # The missed runs between minutes 161 and 400 are caught up by one report covering the gap.
    assert max(end - start for start, end in spans) >= 239 * MINUTE
    assert checkpoint(aws) == spans[-1][1]


def test_given_first_run_when_no_checkpoint_then_starts_one_interval_back_on_a_quarter_hour(
    client: Any, aws: Any, clock: Any
) -> None:
    clock.advance(-2 * HOUR)
    post_events(client, [{"counter": "too-old"}])
    clock.advance(2 * HOUR)
    post_events(client, [{"counter": "recent"}])
    clock.advance(REPORT_SETTLE)
    answer = run_now(client)
    assert answer.status_code == 201
    (report,) = all_reports(aws)
    start, end = report_ranges.parse_report_id(report["id"])
    assert start == report_ranges.first_start(end, SETTINGS.report_interval_minutes)
    assert end == clock.now - SETTINGS.report_settle_seconds * 1000
    assert list(report["counters"]) == ["recent"]


def test_given_events_inside_the_settle_delay_when_run_then_they_wait_for_the_next_report(
    client: Any, aws: Any, clock: Any
) -> None:
    post_events(client, [{"counter": "settled"}])
    clock.advance(REPORT_SETTLE + 1000)
    post_events(client, [{"counter": "in-flight"}])
    run_now(client)
    assert [list(r["counters"]) for r in all_reports(aws)] == [["settled"]]
    clock.advance(REPORT_SETTLE)
    run_now(client)
    assert [list(r["counters"]) for r in all_reports(aws)] == [["settled"], ["in-flight"]]


def test_given_nothing_new_when_run_then_empty_range_writes_nothing_and_quiet_range_writes_empty_report(
    client: Any, aws: Any, clock: Any
) -> None:
    post_events(client, [{"counter": "jobs"}])
    clock.advance(REPORT_SETTLE)
    assert run_now(client).status_code == 201
    # Same instant again: the range [checkpoint, now - settle) is empty, no report.
    again = run_now(client)
    assert again.status_code == 200
    assert again.json_body == {"reports": [], "superseded": False, "more": False}
    # Time passed with no events: an empty report keeps the sequence of reports gapless.
    clock.advance(HOUR)
    quiet = run_now(client)
    assert quiet.status_code == 201
    found = all_reports(aws)
    assert [r["events"] for r in found] == [1, 0]
    assert found[1]["counters"] == {}
    assert found[0]["end"] == found[1]["start"]


def test_given_a_gap_longer_than_a_day_when_run_then_caught_up_in_reports_of_at_most_a_day(
    client: Any, aws: Any, clock: Any
) -> None:
    run_now(client)
    expected = {}
    for n in range(6):
        post_events(client, [{"counter": f"e{n}", "attributes": {"amount": n}}])
        expected[f"e{n}"] = n
        clock.advance(9 * HOUR)
    # 54 hours: 3 x 96 quarter hours x 4 shards = 1,152 Queries, within a scheduled run's bound.
    answer = run_scheduled(client)
    assert (len(answer["reports"]), answer["more"]) == (3, False)
    found = all_reports(aws)
    spans = [report_ranges.parse_report_id(r["id"]) for r in found]
    assert all(end - start <= reports_runs.MAX_REPORT_SPAN_MS for start, end in spans)
    assert_each_event_once([r for r in found if r["events"]], expected)
    assert all(a["end"] == b["start"] for a, b in zip(found, found[1:]))


@pytest.mark.parametrize("second_delay_ms", [0, 5000])  # same range (same id) or a longer one
def test_given_two_runs_at_once_when_both_read_the_checkpoint_then_one_report_and_loser_objects_removed(
    aws: Any, clock: Any, client: Any, second_delay_ms: int
) -> None:
    post_events(client, [{"counter": f"e{n}", "attributes": {"amount": n}} for n in range(30)])
    clock.advance(REPORT_SETTLE)
    both_read = threading.Barrier(2, timeout=60)
    one_write = threading.Lock()

    def held_put(**kwargs: Any) -> Any:
        if kwargs["Key"].endswith(".json"):
            both_read.wait()  # neither commits before both have read the same checkpoint
        # moto in-process breaks when two threads write one key at once; S3 does not.
        with one_write:
            return aws.s3.put_object(**kwargs)

    def serialized_transact(**kwargs: Any) -> Any:
        # DynamoDB serializes transactions; moto in-process does not (a failed one restores a
        # copy of the table taken before the other committed), so serialize them here.
        with one_write:
            return aws.dynamodb.transact_write_items(**kwargs)

    s3 = Patched(aws.s3, put_object=held_put)
    dynamodb = Patched(aws.dynamodb, transact_write_items=serialized_transact)
    results: list[Any] = []
    errors: list[BaseException] = []

    def one_run(now: int) -> None:
        try:
            results.append(reports_runs.run(dynamodb, s3, SETTINGS, now, reports_runs.scheduled_budget(SETTINGS)))
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=one_run, args=(clock.now + delta,)) for delta in (0, second_delay_ms)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(r.superseded for r in results) == [False, True]
    found = all_reports(aws)
    assert len(found) == 1
    assert_each_event_once(found, {f"e{n}": n for n in range(30)})
    keys = [o["Key"] for o in aws.s3.list_objects_v2(Bucket=SETTINGS.reports_bucket).get("Contents", [])]
    assert sorted(keys) == [f"reports/{found[0]['id']}.csv", f"reports/{found[0]['id']}.json"]


def test_given_s3_write_fails_when_run_then_checkpoint_stays_and_next_run_reports_every_event_once(
    aws: Any, clock: Any, client: Any
) -> None:
    run_now(client)
    before = checkpoint(aws)
    post_events(client, [{"counter": f"e{n}", "attributes": {"amount": n}} for n in range(10)])
    clock.advance(REPORT_SETTLE + MINUTE)

    def failing_put(**kwargs: Any) -> Any:
        raise ClientError({"Error": {"Code": "InternalError", "Message": "S3 is down"}}, "PutObject")

    with pytest.raises(StorageError):
        reports_runs.run(
            aws.dynamodb,
            Patched(aws.s3, put_object=failing_put),
            SETTINGS,
            clock.now,
            reports_runs.scheduled_budget(SETTINGS),
        )
    assert checkpoint(aws) == before
    assert len(all_reports(aws)) == 1
    clock.advance(MINUTE)
    run_now(client)
    assert_each_event_once(all_reports(aws)[1:], {f"e{n}": n for n in range(10)})


def test_given_commit_fails_after_s3_write_when_run_then_report_not_listed_and_rerun_covers_the_range(
    aws: Any, clock: Any, client: Any, app_module: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    post_events(client, [{"counter": f"e{n}", "attributes": {"amount": n}} for n in range(10)])
    clock.advance(REPORT_SETTLE)
    real_transact = aws.dynamodb.transact_write_items

    def dying(**kwargs: Any) -> Any:
        raise ClientError({"Error": {"Code": "InternalServerError", "Message": "gone"}}, "TransactWriteItems")

    monkeypatch.setattr(aws.dynamodb, "transact_write_items", dying)
    failed = run_now(client)
    assert failed.status_code == 503
    assert checkpoint(aws) is None
    assert client.http.get("/reports").json_body == {"reports": [], "next": None}
    monkeypatch.setattr(aws.dynamodb, "transact_write_items", real_transact)
    clock.advance(MINUTE)
    assert run_now(client).status_code == 201
    assert_each_event_once(all_reports(aws), {f"e{n}": n for n in range(10)})


def test_given_reports_when_read_over_http_then_listed_newest_first_and_served_with_csv_alongside(
    client: Any, aws: Any, clock: Any
) -> None:
    post_events(
        client,
        [
            {"counter": "sales", "attributes": {"amount": 1.25}},
            {"counter": "sales", "attributes": {"amount": 2.5, "qty": 3}},
            {"counter": "refunds"},
        ],
    )
    clock.advance(REPORT_SETTLE)
    run_now(client)
    clock.advance(20 * MINUTE)
    post_events(client, [{"counter": "sales", "attributes": {"amount": 4}}])
    clock.advance(REPORT_SETTLE)
    run_now(client)

    listed = client.http.get("/reports").json_body["reports"]
    assert [r["events"] for r in listed] == [1, 3]
    assert listed[0]["start"] == listed[1]["end"]
    assert set(listed[0]) == {"id", "start", "end", "events"}
    assert client.http.get("/reports?limit=1").json_body["reports"] == listed[:1]

    first = client.http.get(f"/reports/{listed[1]['id']}")
    assert first.status_code == 200
    assert first.json_body == {
        "id": listed[1]["id"],
        "start": listed[1]["start"],
        "end": listed[1]["end"],
        "events": 3,
        "counters": {
            "refunds": {"events": 1, "sums": {}, "sums_exact": {}},
            "sales": {"events": 2, "sums": {"amount": 3.75, "qty": 3}, "sums_exact": {"amount": "3.75", "qty": "3"}},
        },
    }
    body = aws.s3.get_object(Bucket=SETTINGS.reports_bucket, Key=f"reports/{listed[1]['id']}.csv")["Body"].read()
    assert list(csv.reader(io.StringIO(body.decode()))) == [
        ["counter", "events", "amount", "qty"],
        ["refunds", "1", "", ""],
        ["sales", "2", "3.75", "3"],
    ]


def test_given_attribute_names_a_spreadsheet_would_run_when_reported_then_the_stored_csv_quotes_them(
    client: Any, aws: Any, clock: Any
) -> None:
    formulas = ['=HYPERLINK("https://evil.example","x")', "+1", "-2+3", "@SUM(A1)", "\tx", "\rx", "'q"]
    post_events(
        client,
        [
            {"counter": "-refunds", "attributes": {name: -3 for name in formulas}},
            {"counter": "sales", "attributes": {"amount": -0.5}},
        ],
    )
    clock.advance(REPORT_SETTLE)
    run_now(client)

    (listed,) = client.http.get("/reports").json_body["reports"]
    body = aws.s3.get_object(Bucket=SETTINGS.reports_bucket, Key=f"reports/{listed['id']}.csv")["Body"].read()
    header, refunds, sales = csv.reader(io.StringIO(body.decode(), newline=""))
    assert header == ["counter", "events", *(f"'{name}" for name in sorted(formulas)), "amount"]
    assert refunds == ["'-refunds", "1", *["-3"] * len(formulas), ""]  # negative sums stay numbers
    assert sales == ["sales", "1", *[""] * len(formulas), "-0.5"]
    # The JSON keeps the names as written.
    report = client.http.get(f"/reports/{listed['id']}").json_body
    assert set(report["counters"]["-refunds"]["sums"]) == set(formulas)


@pytest.mark.parametrize(
    "path, status",
    [
        ("/reports/20201121T230000000Z-20201122T000000000Z", 404),
        ("/reports/latest", 400),
        ("/reports/20261121T230000000Z-20261121T220000000Z", 400),
        ("/reports?limit=0", 400),
        ("/reports?limit=lots", 400),
    ],
)
def test_given_unknown_or_malformed_report_requests_when_read_then_clear_4xx(
    client: Any, path: str, status: int
) -> None:
    response = client.http.get(path)
    assert response.status_code == status
    assert set(response.json_body) == {"Code", "Message"}
