"""Each handler's one line per invocation: CloudWatch EMF metrics and log fields, no payload."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from chalicelib.core import queues
from chalicelib.core.errors import StorageError
from chalicelib.core.settings import Settings
from tests.functional.helpers import invoke
from tests.functional.stream_fixtures import lambda_event, stored_event_records

SETTINGS = Settings()
SECRET = "visitor-secret-4711"


@pytest.fixture(autouse=True)
def fresh_queue_cache() -> None:
    queues.queue_url.cache_clear()
    queues.dead_letter_url.cache_clear()


def lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    out = capsys.readouterr().out
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def emf(lines_: list[dict[str, Any]], function: str) -> list[dict[str, Any]]:
    return [line for line in lines_ if "_aws" in line and line.get("function") == function]


def metrics_of(document: dict[str, Any]) -> dict[str, tuple[float, str]]:
    """Metric name -> (value, unit), checked against the EMF schema's shape."""
    (directive,) = document["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "Tally"
    assert directive["Dimensions"] == [["function"]]
    assert isinstance(document["_aws"]["Timestamp"], int)
    found = {}
    for metric in directive["Metrics"]:
        value = document[metric["Name"]]  # EMF allows a value or a list of values
        (value,) = value if isinstance(value, list) else [value]
        found[metric["Name"]] = (value, metric["Unit"])
    return found


def post(client: Any, path: str, body: Any) -> Any:
    return client.http.post(path, headers={"Content-Type": "application/json"}, body=json.dumps(body))


def test_given_a_stream_batch_delivered_twice_when_handled_then_one_emf_line_each_with_counts_and_lag(
    client: Any, aws: Any, clock: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    clock.now = int(time.time() * 1000)
    assert post(client, "/events", {"events": [{"counter": "c1"}, {"counter": "c2"}]}).status_code == 201
    records = stored_event_records(aws.dynamodb)
    created = time.time() - 30
    for r in records:
        r["dynamodb"]["ApproximateCreationDateTime"] = created
    capsys.readouterr()

    invoke(client, "on_event_records", lambda_event(records))
    invoke(client, "on_event_records", lambda_event(records))

    first, second = emf(lines(capsys), "on_event_records")
    m1, m2 = metrics_of(first), metrics_of(second)
    assert len(records) == 1  # the request's two events in one pack: one stream record
    assert m1["Records"] == (1, "Count") and m1["Counted"] == (2, "Count") and m1["Duplicates"] == (0, "Count")
    assert m2["Counted"] == (0, "Count") and m2["Duplicates"] == (2, "Count")
    assert m1["Quarantined"][0] == 0 and m1["TransactionRetries"][0] == 0
    lag, unit = m1["StreamLag"]
    assert unit == "Milliseconds" and 30_000 <= lag < 90_000
    assert first["first_record"] == records[0]["eventID"] and first["last_record"] == records[-1]["eventID"]
    assert first["request_id"] and first["duration_ms"] >= 0 and first["level"] == "INFO"


def test_given_a_poison_stream_record_when_handled_then_quarantined_metric(
    client: Any, aws: Any, clock: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert post(client, "/events", {"counter": "c1"}).status_code == 201
    (record,) = stored_event_records(aws.dynamodb)
    record["dynamodb"]["NewImage"]["counter"] = {"S": "bad name with spaces"}
    capsys.readouterr()

    invoke(client, "on_event_records", lambda_event([record]))

    (line,) = emf(lines(capsys), "on_event_records")
    assert metrics_of(line)["Quarantined"] == (1, "Count")


def test_given_views_with_a_poison_message_when_handled_then_dead_lettered_and_no_payload_logged(
    client: Any, aws: Any, app_module: Any, clock: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    view = {"url": f"https://blog.example/{SECRET}", "time": clock.now - 60_000, "clientId": SECRET}
    assert post(client, "/views", view).status_code == 202
    url = aws.sqs.get_queue_url(QueueName=SETTINGS.views_queue)["QueueUrl"]
    (message,) = aws.sqs.receive_message(QueueUrl=url, AttributeNames=["All"]).get("Messages", [])
    good = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message["Attributes"],
        "eventSource": "aws:sqs",
    }
    poison = {**good, "messageId": "m-poison", "body": "not a view " + SECRET}
    capsys.readouterr()

    invoke(client, "on_view_messages", {"Records": [good, poison]})

    captured = lines(capsys)
    (line,) = emf(captured, "on_view_messages")
    m = metrics_of(line)
    assert m["Counted"][0] == 1 and m["Quarantined"][0] == 1 and m["DeadLettered"][0] == 1
    assert m["QueueLag"][1] == "Milliseconds"
    assert SECRET not in json.dumps(captured)


def test_given_unique_items_when_handled_then_counted_and_sketch_conflicts_emitted(
    client: Any, aws: Any, clock: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert post(client, "/hyperloglog/visitors", {"data": [SECRET, "v2"]}).status_code == 202
    url = aws.sqs.get_queue_url(QueueName=SETTINGS.uniques_queue)["QueueUrl"]
    (message,) = aws.sqs.receive_message(QueueUrl=url).get("Messages", [])
    record = {"messageId": message["MessageId"], "receiptHandle": "rh", "body": message["Body"]}
    capsys.readouterr()

    invoke(client, "on_unique_items", {"Records": [record]})

    captured = lines(capsys)
    (line,) = emf(captured, "on_unique_items")
    m = metrics_of(line)
    assert m["Counted"][0] == 1 and m["SketchWriteConflicts"] == (0, "Count")
    assert line["counts"]["items"] == 2
    assert SECRET not in json.dumps(captured)


def test_given_events_to_report_when_scheduled_run_then_report_metrics(
    client: Any, aws: Any, clock: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert post(client, "/reports", {}).status_code in (200, 201)  # sets the checkpoint
    clock.advance(60_000)
    assert post(client, "/events", {"events": [{"counter": "c1"}, {"counter": "c1"}, {"counter": "c2"}]}).status_code
    clock.advance(SETTINGS.report_settle_seconds * 1000 + 60_000)
    capsys.readouterr()

    event = client.events.generate_cw_event("aws.events", "Scheduled Event", {}, [])
    invoke(client, "run_scheduled_report", event)

    (line,) = emf(lines(capsys), "run_scheduled_report")
    m = metrics_of(line)
    assert m["ReportRuns"] == (1, "Count") and m["ReportsWritten"][0] == 1 and m["EventsReported"][0] == 3
    assert line["event_id"]


def test_given_logged_names_when_the_fold_runs_then_fold_metrics(
    client: Any, aws: Any, clock: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert post(client, "/events", {"events": [{"counter": "c1"}, {"counter": "c2"}]}).status_code == 201
    invoke(client, "on_event_records", lambda_event(stored_event_records(aws.dynamodb)))
    capsys.readouterr()

    event = client.events.generate_cw_event("aws.events", "Scheduled Event", {}, [])
    invoke(client, "fold_catalogs", event)

    (line,) = emf(lines(capsys), "fold_catalogs")
    m = metrics_of(line)
    assert m["CatalogFolds"] == (1, "Count") and m["CatalogLogsFolded"][0] == 1
    assert m["CatalogPagesWritten"][0] == 1 and m["CatalogFoldRaces"][0] == 0


def test_given_a_handler_that_fails_when_invoked_then_one_error_line_and_no_metrics(
    client: Any, aws: Any, app_module: Any, clock: Any, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    assert post(client, "/events", {"counter": "c1"}).status_code == 201
    records = stored_event_records(aws.dynamodb)

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise StorageError("could not write the counts")

    monkeypatch.setattr(app_module.stream, "apply_stream_batch", fail)
    capsys.readouterr()

    with pytest.raises(StorageError):
        invoke(client, "on_event_records", lambda_event(records))

    captured = lines(capsys)
    assert not emf(captured, "on_event_records")
    (error,) = [line for line in captured if line.get("level") == "ERROR"]
    assert error["function"] == "on_event_records" and error["error"] == "StorageError"
    assert error["first_record"] == records[0]["eventID"] and error["request_id"]


def test_given_a_bad_request_when_answered_then_one_warning_line_without_the_body(
    client: Any, clock: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()

    response = post(client, "/events", {"counter": SECRET + " not a name"})

    assert response.status_code == 400
    captured = lines(capsys)
    (line,) = captured
    assert line["level"] == "WARNING" and line["status"] == 400 and line["code"] == "BadRequestError"
    assert line["route"] == "/events" and line["method"] == "POST"
    assert SECRET not in json.dumps(captured)
