"""Tally: routes and event handlers. Each parses its input, calls chalicelib, shapes the answer."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from chalice.app import BadRequestError, Chalice, NotFoundError, Rate, Request, Response

from chalicelib.core import clock, inputs, quarantine, queues, validation
from chalicelib.core import window_params as windows
from chalicelib.core.aws import AwsClients
from chalicelib.core.errors import NotFoundError as TallyNotFound
from chalicelib.core.errors import PartialWriteError, RejectedError, StorageError, ValidationError
from chalicelib.core.settings import Settings
from chalicelib.counters import reads as counters
from chalicelib.counters import stream_apply as counting
from chalicelib.events import ingest as events
from chalicelib.events import stream_records
from chalicelib.reports import api as reports_api
from chalicelib.reports import runs as reports_runs
from chalicelib.uniques import api as uniques_api
from chalicelib.uniques import batches as uniques_batches
from chalicelib.views import api as views_api
from chalicelib.views import batches as views_batches
from chalicelib.views import keys as view_keys

app = Chalice(app_name="tally")
app.log.setLevel(logging.INFO)
settings = Settings.from_env()
aws = AwsClients(settings)

# curl -d sends form-encoded by default; every body is parsed as JSON whatever its label.
BODY_TYPES = ["application/json", "application/x-www-form-urlencoded", "text/plain"]


def answers(view: Callable[..., Any]) -> Callable[..., Any]:
    """Map Tally's exceptions to Chalice's JSON errors: the one place this happens."""

    @functools.wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return view(*args, **kwargs)
        except ValidationError as exc:
            raise BadRequestError(str(exc)) from exc
        except TallyNotFound as exc:
            raise NotFoundError(str(exc)) from exc
        except RejectedError as exc:  # storage refused the data itself: retrying cannot help
            raise BadRequestError(str(exc)) from exc
        except PartialWriteError as exc:
            body = {"Code": "PartialWrite", "Message": str(exc), **exc.details()}
            return Response(body=body, status_code=503)
        except StorageError as exc:
            app.log.exception("storage failure")
            return Response(body={"Code": "ServiceUnavailable", "Message": str(exc)}, status_code=503)

    return wrapper


def request() -> Request:
    current = app.current_request
    assert current is not None, "only called while a request is handled"
    return current


def json_body() -> Any:
    return inputs.json_body(request().raw_body)


def query() -> dict[str, str]:
    return inputs.query(request().query_params)


# -- events and windowed counters ---------------------------------------------------------


@app.route("/events", methods=["POST"], content_types=BODY_TYPES)
@answers
def post_events() -> Response:
    now = clock.now_ms()
    batch = events.parse_body(json_body(), now, settings)
    ids = events.store(aws.dynamodb, settings, batch, now)
    return Response(body={"ids": ids}, status_code=201)


@app.route("/counters/{counter}", methods=["GET"])
@answers
def get_counter(counter: str) -> dict[str, Any]:
    now = clock.now_ms()
    first, last = windows.minute_range(query(), now)
    name = validation.name(counter, "counter")
    return counters.count_window(aws.dynamodb, settings, name, first, last, now).as_dict()


@app.route("/counters/{counter}/histogram", methods=["GET"])
@answers
def get_histogram(counter: str) -> dict[str, Any]:
    now = clock.now_ms()
    params = query()
    first, last = windows.minute_range(params, now)
    name = validation.name(counter, "counter")
    return counters.histogram(aws.dynamodb, settings, name, first, last, windows.resolution(params), now)


@app.route("/quarantine", methods=["GET"])
@answers
def get_quarantine() -> dict[str, Any]:
    return {"records": quarantine.list_records(aws.dynamodb, settings, query().get("source"))}


@app.on_dynamodb_record(
    stream_arn=settings.events_stream_arn,
    batch_size=settings.stream_batch_size,
    starting_position="TRIM_HORIZON",
)
def on_event_records(event: Any) -> dict[str, Any]:
    records = stream_records.from_lambda_event(event.to_dict())
    result = counting.apply_stream_batch(aws.dynamodb, settings, records, clock.now_ms())
    app.log.info("event records: %s", result.as_dict())
    return result.as_dict()


# -- unique counts (HyperLogLog) ----------------------------------------------------------


@app.route("/hyperloglog/{name}", methods=["POST"], content_types=BODY_TYPES)
@answers
def post_unique_items(name: str) -> Response:
    sketch_name = validation.name(name, "name")
    accepted = uniques_api.enqueue(aws.sqs, settings, sketch_name, uniques_api.parse_items(json_body()))
    return Response(body={"accepted": accepted}, status_code=202)


@app.route("/hyperloglog/{name}", methods=["GET"])
@answers
def get_unique_count(name: str) -> dict[str, Any]:
    sketch_name = validation.name(name, "name")
    return {"name": sketch_name, **uniques_api.cardinality(aws.dynamodb, settings, [sketch_name])}


@app.route("/hyperloglog", methods=["GET"])
@answers
def get_union_count() -> dict[str, Any]:
    names = uniques_api.parse_names(query().get("names"))
    return {"names": names, **uniques_api.cardinality(aws.dynamodb, settings, names)}


@app.on_sqs_message(
    queue=settings.uniques_queue,
    batch_size=settings.uniques_batch_size,
    maximum_batching_window_in_seconds=settings.uniques_batching_window_seconds,
)
def on_unique_items(event: Any) -> dict[str, Any]:
    result = uniques_batches.apply_messages(
        aws.dynamodb, settings, queues.from_lambda_event(event.to_dict()), clock.now_ms()
    )
    app.log.info("unique items: %s", result.as_dict())
    return result.as_dict()


# -- scheduled reports ------------------------------------------------------------------------


@app.schedule(Rate(settings.report_interval_minutes, unit=Rate.MINUTES))
def run_scheduled_report(event: Any) -> dict[str, Any]:
    result = reports_runs.run(aws.dynamodb, aws.s3, settings, clock.now_ms())
    app.log.info("report run: %s", result.as_dict())
    return result.as_dict()


@app.route("/reports", methods=["POST"], content_types=BODY_TYPES)
@answers
def post_reports() -> Response:
    result = reports_runs.run(aws.dynamodb, aws.s3, settings, clock.now_ms())
    return Response(body=result.as_dict(), status_code=201 if result.written else 200)


@app.route("/reports", methods=["GET"])
@answers
def get_reports() -> dict[str, Any]:
    return {"reports": reports_api.list_reports(aws.dynamodb, settings, query().get("limit"))}


@app.route("/reports/{report_id}", methods=["GET"])
@answers
def get_report(report_id: str) -> dict[str, Any]:
    return reports_api.get_report(aws.dynamodb, aws.s3, settings, report_id)


# -- exact view counters ----------------------------------------------------------------


@app.route("/views", methods=["POST"], content_types=BODY_TYPES)
@answers
def post_views() -> Response:
    views_api.enqueue(aws.sqs, settings, view_keys.parse_body(json_body()))
    return Response(body={"accepted": True}, status_code=202)


@app.route("/views", methods=["GET"])
@answers
def get_views() -> dict[str, Any]:
    now = clock.now_ms()
    params = query()
    url = view_keys.text(params.get("url"), "url", view_keys.URL_MAX_CHARS)
    start = validation.time_ms(params["start"], "start") if "start" in params else None
    end = validation.time_ms(params["end"], "end") if "end" in params else None
    return views_api.count(aws.dynamodb, settings, url, start, end, now)


@app.on_sqs_message(
    queue=settings.views_queue,
    batch_size=settings.views_batch_size,
    maximum_batching_window_in_seconds=settings.views_batching_window_seconds,
)
def on_view_messages(event: Any) -> dict[str, int]:
    messages = queues.from_lambda_event(event.to_dict())
    result = views_batches.apply_messages(aws.dynamodb, aws.sqs, settings, messages, clock.now_ms())
    app.log.info("view messages: %s", result.as_dict())
    return result.as_dict()
