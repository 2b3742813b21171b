"""Tally: routes and event handlers. Each parses its input, calls chalicelib, shapes the answer."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from chalice.app import AuthRequest, BadRequestError, Chalice, NotFoundError, Rate, Request, Response

# Modules whose names repeat across packages (api, batches, catalog, validation) are named in full.
import chalicelib.counters.catalog
import chalicelib.reports.api
import chalicelib.sites.api
import chalicelib.sites.settings
import chalicelib.uniques.api
import chalicelib.uniques.batches
import chalicelib.views.api
import chalicelib.views.batches
import chalicelib.views.catalog
import chalicelib.views.validation
from chalicelib.access import gate, policy, rates, store
from chalicelib.contract import document
from chalicelib.core import clock, errors, inputs, pager, quarantine, queues, telemetry, validation, window_params
from chalicelib.core.aws import AwsClients
from chalicelib.core.catalog import fold_all
from chalicelib.core.settings import Settings
from chalicelib.core.static import Asset
from chalicelib.counters import audit_runs, breakdowns, filters, reads, repair, replay, stream
from chalicelib.dashboard import assets
from chalicelib.events import ingest, stream_records
from chalicelib.reports import runs
from chalicelib.sites import beacon, function_url, script

app = Chalice(app_name="tally")
app.log.setLevel(logging.INFO)
settings = Settings.from_env()
aws = AwsClients(settings)
# One JSON line (log + EMF metrics) per background invocation and per failed request.
app.register_middleware(telemetry.middleware, "all")

# curl -d sends form-encoded by default; every body is parsed as JSON whatever its label.
BODY_TYPES = ["application/json", "application/x-www-form-urlencoded", "text/plain"]


def answers(view: Callable[..., Any]) -> Callable[..., Any]:
    """Map Tally's exceptions to Chalice's JSON errors: the one place this happens, applied to every
    route at the end of this file."""

    @functools.wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return view(*args, **kwargs)
        except errors.ValidationError as exc:
            raise BadRequestError(str(exc)) from exc
        except errors.NotFoundError as exc:
            raise NotFoundError(str(exc)) from exc
        except errors.RejectedError as exc:  # storage refused the data itself: retrying cannot help
            raise BadRequestError(str(exc)) from exc
        except errors.PartialWriteError as exc:
            body = {"Code": "PartialWrite", "Message": str(exc), **exc.details}
            return Response(body=body, status_code=503)
        except errors.StorageError as exc:  # logged once, by the telemetry middleware's line for the request
            return Response(body={"Code": "ServiceUnavailable", "Message": str(exc)}, status_code=503)

    wrapper.maps_errors = True  # type: ignore[attr-defined]
    return wrapper


def request() -> Request:
    current = app.current_request
    assert current is not None, "only called while a request is handled"
    return current


def json_body() -> Any:
    return inputs.json_body(request().raw_body)


def query() -> dict[str, str]:
    return inputs.query(request().query_params)


def where() -> dict[str, str]:
    """The `where=name:value` filters of the request (repeatable)."""
    params = request().query_params
    return filters.parse_where(params.getlist("where") if params and "where" in params else [])


# -- access: keys and scopes (docs/access.md) ----------------------------------------------


def find_key(key: str) -> policy.KeyRecord | None:
    return store.find(aws.dynamodb, settings, key)


@app.authorizer(ttl_seconds=settings.key_cache_seconds)
def ingest_key(auth: AuthRequest) -> dict[str, Any]:
    return gate.authorize(find_key, auth.token, auth.method_arn, policy.INGEST)


@app.authorizer(ttl_seconds=settings.key_cache_seconds)
def read_key(auth: AuthRequest) -> dict[str, Any]:
    return gate.authorize(find_key, auth.token, auth.method_arn, policy.READ)


@app.authorizer(ttl_seconds=settings.key_cache_seconds)
def admin_key(auth: AuthRequest) -> dict[str, Any]:
    return gate.authorize(find_key, auth.token, auth.method_arn, policy.ADMIN)


beacon_keys = store.CachedLookup(find_key, settings.key_cache_seconds)


def admit(record: policy.KeyRecord, now_ms: int) -> bool:
    return rates.admit(aws.dynamodb, settings, record.id, record.rate_per_second, now_ms)


@app.middleware("http")
def access_and_cors(event: Request, get_response: Callable[[Request], Response]) -> Response:
    """What only the request shows (names against a key's prefix, Origin against an ingest
    key's origins, beacon keys, a tracker key's sites), the key's request rate, then CORS headers
    on every answer, errors included."""
    route, method = event.context.get("resourcePath", ""), event.method
    entry = app.routes.get(route, {}).get(method)
    if method == "OPTIONS":
        return get_response(event)
    outcome = gate.check_request(
        policy.route_access(method, route, entry.authorizer.name if entry and entry.authorizer else None),
        event.uri_params or {},
        event.query_params or {},
        event.raw_body,
        event.headers.get("origin"),
        event.context.get("authorizer"),
        beacon_keys,
        settings.cors_origins,
        clock.now_ms(),
        admit,
    )
    if not outcome.decision.allowed:
        body, status = gate.error_body(outcome.decision), outcome.decision.status
        response = Response(body=body, status_code=status, headers=outcome.refusal_headers())
    else:
        response = get_response(event)
    response.headers.update(outcome.cors_headers())
    return response


def preflight(**_path_params: str) -> Response:
    """A browser's CORS preflight, for every path (registered at the end of this file)."""
    route = request().context["resourcePath"]
    authorizers = {
        m: e.authorizer.name if e.authorizer else None for m, e in app.routes[route].items() if m != "OPTIONS"
    }
    headers = gate.preflight_headers(request().headers.get("origin"), settings.cors_origins, route, authorizers)
    if headers is None:
        return Response(
            body={"Code": "ForbiddenError", "Message": "this origin may not call this route"}, status_code=403
        )
    return Response(body="", headers=dict(headers), status_code=204)


@app.route("/keys", methods=["POST"], authorizer=admin_key, content_types=BODY_TYPES)
def post_key() -> Response:
    key, record = store.create(aws.dynamodb, settings, policy.parse_new_key(json_body()), clock.now_ms())
    return Response(body={**record.as_dict(), "key": key}, status_code=201)


@app.route("/keys", methods=["GET"], authorizer=admin_key)
def get_keys() -> dict[str, Any]:
    records, cursor = store.page_keys(aws.dynamodb, settings, query())
    return {"keys": [record.as_dict() for record in records], "next": cursor}


@app.route("/keys/{key_id}", methods=["DELETE"], authorizer=admin_key)
def delete_key(key_id: str) -> dict[str, Any]:
    return store.revoke(aws.dynamodb, settings, key_id, clock.now_ms()).as_dict()


# -- events and windowed counters ---------------------------------------------------------


@app.route("/events", methods=["POST"], authorizer=ingest_key, content_types=BODY_TYPES)
@app.route("/beacon/events", methods=["POST"], content_types=BODY_TYPES)
def post_events() -> Response:
    now = clock.now_ms()
    batch = ingest.parse_body(json_body(), now, settings)
    ids = ingest.store(aws.dynamodb, settings, batch, now)
    return Response(body={"ids": ids}, status_code=201)


@app.route("/counters/{counter}", methods=["GET"], authorizer=read_key)
def get_counter(counter: str) -> dict[str, Any]:
    now = clock.now_ms()
    window = window_params.window(query(), now)
    name, clauses = validation.name(counter, "counter"), where()
    return window_params.compared(
        window,
        lambda first, last: reads.count_window(aws.dynamodb, settings, name, first, last, now, where=clauses).as_dict(
            window.label
        ),
    )


@app.route("/counters/{counter}/histogram", methods=["GET"], authorizer=read_key)
def get_histogram(counter: str) -> dict[str, Any]:
    now = clock.now_ms()
    params = query()
    window = window_params.window(params, now)
    name, clauses = validation.name(counter, "counter"), where()
    resolution = window_params.local_resolution(params)
    zone = window.zone if window.local else None
    return window_params.compared(
        window,
        lambda first, last: reads.histogram(aws.dynamodb, settings, name, first, last, resolution, now, clauses, zone),
    )


@app.route("/counters/{counter}/breakdown", methods=["GET"], authorizer=read_key)
def get_breakdown(counter: str) -> dict[str, Any]:
    now = clock.now_ms()
    params = query()
    window = window_params.window(params, now)
    name, by, clauses = validation.name(counter, "counter"), params.get("by", ""), where()
    limit = pager.page_limit(params.get("limit"), breakdowns.DEFAULT_LIMIT, breakdowns.MAX_LIMIT)
    return window_params.compared(
        window,
        lambda first, last: breakdowns.breakdown(
            aws.dynamodb, settings, name, by, first, last, limit, clauses, now, window.label
        ),
    )


@app.route("/quarantine", methods=["GET"], authorizer=admin_key)
def get_quarantine() -> dict[str, Any]:
    return quarantine.list_records(aws.dynamodb, settings, query())


@app.route("/quarantine/replay", methods=["POST"], authorizer=admin_key, content_types=BODY_TYPES)
def post_quarantine_replay() -> dict[str, Any]:
    asked = replay.parse_body(json_body())
    return replay.replay(aws.dynamodb, settings, asked, clock.now_ms()).as_dict()


@app.on_dynamodb_record(
    stream_arn=settings.events_stream_arn,
    batch_size=settings.stream_batch_size,
    starting_position="TRIM_HORIZON",
)
def on_event_records(event: Any) -> dict[str, Any]:
    # The mapping has a tumbling window (for `shardId`): Lambda wants `{"state": ...}` back. The
    # state carries this invocation's counts (telemetry reads them there); nothing reads it back.
    records = stream_records.from_lambda_event(event.to_dict())
    result = stream.apply_stream_batch(aws.dynamodb, settings, records, clock.now_ms())
    return {**stream_records.window_response(), "state": result.as_dict()}


# -- the audit: what was counted against what was stored (docs/counting.md) ----------------------


@app.schedule(Rate(settings.audit_interval_minutes, unit=Rate.MINUTES))
def run_audit(event: Any) -> dict[str, Any]:
    return audit_runs.run(aws.dynamodb, settings, clock.now_ms()).as_dict()


@app.route("/audit", methods=["POST"], authorizer=admin_key, content_types=BODY_TYPES)
def post_audit() -> dict[str, Any]:
    return audit_runs.run(aws.dynamodb, settings, clock.now_ms()).as_dict()


@app.route("/audit/repair", methods=["POST"], authorizer=admin_key, content_types=BODY_TYPES)
def post_audit_repair() -> dict[str, Any]:
    now = clock.now_ms()
    partition = audit_runs.parse_partition(json_body(), settings, now)
    return repair.repair(aws.dynamodb, settings, partition, now).as_dict()


@app.route("/audit", methods=["GET"], authorizer=admin_key)
def get_audit() -> dict[str, Any]:
    return audit_runs.listing(aws.dynamodb, settings, query(), clock.now_ms())


# -- unique counts (HyperLogLog) ----------------------------------------------------------


@app.route("/hyperloglog/{name}", methods=["POST"], authorizer=ingest_key, content_types=BODY_TYPES)
@app.route("/beacon/hyperloglog/{name}", methods=["POST"], content_types=BODY_TYPES)
def post_unique_items(name: str) -> Response:
    sketch_name = validation.name(name, "name")
    post = chalicelib.uniques.api.parse_body(json_body(), clock.now_ms(), settings)
    return Response(
        body={"accepted": chalicelib.uniques.api.enqueue(aws.sqs, settings, aws.item_key, sketch_name, post)},
        status_code=202,
    )


@app.route("/hyperloglog/{name}", methods=["GET"], authorizer=read_key)
def get_unique_count(name: str) -> dict[str, Any]:
    sketch_name = validation.name(name, "name")
    answer = chalicelib.uniques.api.windowed_count(aws.dynamodb, settings, [sketch_name], query(), clock.now_ms())
    return {"name": sketch_name, **answer}


@app.route("/hyperloglog", methods=["GET"], authorizer=read_key)
def get_union_count() -> dict[str, Any]:
    params = query()
    if "names" not in params:  # without names= the route lists the names that exist
        return chalicelib.uniques.api.list_names(aws.dynamodb, settings, params, clock.now_ms())
    names = chalicelib.uniques.api.parse_names(params["names"])
    return {
        "names": names,
        **chalicelib.uniques.api.windowed_count(aws.dynamodb, settings, names, params, clock.now_ms()),
    }


@app.route("/hyperloglog/{name}/histogram", methods=["GET"], authorizer=read_key)
def get_unique_histogram(name: str) -> dict[str, Any]:
    sketch_name = validation.name(name, "name")
    return chalicelib.uniques.api.windowed_histogram(aws.dynamodb, settings, sketch_name, query(), clock.now_ms())


@app.on_sqs_message(
    queue=settings.uniques_queue,
    batch_size=settings.uniques_batch_size,
    maximum_batching_window_in_seconds=settings.uniques_batching_window_seconds,
)
def on_unique_items(event: Any) -> dict[str, Any]:
    result = chalicelib.uniques.batches.apply_messages(
        aws.dynamodb, settings, queues.from_lambda_event(event.to_dict()), clock.now_ms()
    )
    return result.as_dict()


# -- scheduled reports ------------------------------------------------------------------------


@app.schedule(Rate(settings.report_interval_minutes, unit=Rate.MINUTES))
def run_scheduled_report(event: Any) -> dict[str, Any]:
    result = runs.run(aws.dynamodb, aws.s3, settings, clock.now_ms(), runs.scheduled_budget(settings))
    return result.as_dict()


@app.route("/reports", methods=["POST"], authorizer=admin_key, content_types=BODY_TYPES)
def post_reports() -> Response:
    result = runs.run(aws.dynamodb, aws.s3, settings, clock.now_ms(), runs.request_budget(settings))
    return Response(body=result.as_dict(), status_code=201 if result.written else 200)


@app.route("/reports", methods=["GET"], authorizer=read_key)
def get_reports() -> dict[str, Any]:
    return chalicelib.reports.api.list_reports(aws.dynamodb, settings, query())


@app.route("/reports/{report_id}", methods=["GET"], authorizer=read_key)
def get_report(report_id: str) -> Any:
    report_id, fmt = chalicelib.reports.api.download_format(report_id, query())
    if fmt == "csv":
        return report_csv(report_id)
    return chalicelib.reports.api.get_report(aws.dynamodb, aws.s3, settings, report_id)


# -- exact view counters ----------------------------------------------------------------


@app.route("/views", methods=["POST"], authorizer=ingest_key, content_types=BODY_TYPES)
@app.route("/beacon/views", methods=["POST"], content_types=BODY_TYPES)
def post_views() -> Response:
    chalicelib.views.api.enqueue(aws.sqs, settings, chalicelib.views.validation.parse_body(json_body()), clock.now_ms())
    return Response(body={"accepted": True}, status_code=202)


@app.route("/views", methods=["GET"], authorizer=read_key)
def get_views() -> dict[str, Any]:
    return chalicelib.views.api.windowed_count(aws.dynamodb, settings, query(), clock.now_ms())


@app.route("/views/top", methods=["GET"], authorizer=read_key)
def get_top_views() -> dict[str, Any]:
    return chalicelib.views.api.windowed_top(aws.dynamodb, settings, query(), clock.now_ms())


@app.on_sqs_message(
    queue=settings.views_queue,
    batch_size=settings.views_batch_size,
    maximum_batching_window_in_seconds=settings.views_batching_window_seconds,
)
def on_view_messages(event: Any) -> dict[str, int]:
    messages = queues.from_lambda_event(event.to_dict())
    result = chalicelib.views.batches.apply_messages(aws.dynamodb, aws.sqs, settings, messages, clock.now_ms())
    return result.as_dict()


# -- site analytics: the tracker's beacon (docs/tracker.md) ----------------------------------


@app.route("/beacon/pageview", methods=["POST"], content_types=BODY_TYPES)
def post_pageview() -> Response:
    now = clock.now_ms()
    pageview = beacon.parse_body(json_body(), now, settings)
    ip = str(request().context.get("identity", {}).get("sourceIp", ""))
    agent = request().headers.get("user-agent")
    outcome = beacon.count(aws.dynamodb, aws.sqs, settings, aws.item_key, pageview, ip, agent, now)
    return Response(body=outcome, status_code=202)


@app.lambda_function(name="beacon_url")
def beacon_url(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The tracker's script and beacon behind a Lambda function URL, through the same routes:
    no API Gateway price per page view (docs/tracker.md, "The function URL")."""
    rest = function_url.rest_event(event)
    return function_url.not_found() if rest is None else function_url.response(app(rest, context))


@app.route("/sites", methods=["GET"], authorizer=read_key)
def list_sites() -> dict[str, Any]:
    return chalicelib.sites.api.listing(aws.dynamodb, settings, query(), clock.now_ms())


@app.route("/sites/{site}/summary", methods=["GET"], authorizer=read_key)
def get_site_summary(site: str) -> dict[str, Any]:
    return chalicelib.sites.api.windowed_summary(aws.dynamodb, settings, site, query(), clock.now_ms())


@app.route("/sites/{site}", methods=["GET"], authorizer=admin_key)
def get_site_settings(site: str) -> dict[str, Any]:
    return chalicelib.sites.settings.get(aws.dynamodb, settings, site).as_dict()


@app.route("/sites/{site}", methods=["PUT"], authorizer=admin_key, content_types=BODY_TYPES)
def put_site_settings(site: str) -> dict[str, Any]:
    return chalicelib.sites.settings.put(aws.dynamodb, settings, site, json_body(), clock.now_ms()).as_dict()


@app.route("/sites/{site}/realtime", methods=["GET"], authorizer=read_key)
def get_site_realtime(site: str) -> dict[str, Any]:
    return chalicelib.sites.api.realtime(aws.dynamodb, settings, site, clock.now_ms())


@app.route("/tally.js", methods=["GET"])
def tracker_script() -> Response:
    return static_answer(script.script(), query().get("v"))


# -- the dashboard: its page and assets (no key needed), and the listings it reads ----------------


@app.route("/", methods=["GET"])
def dashboard_page() -> Response:
    # The path as the client asked for it (stage or base path included): the page's URLs are
    # relative to it (dashboard/assets.py).
    return static_answer(assets.page(assets.relative_base(request().context.get("path", "/"))))


@app.route("/dashboard/{name}", methods=["GET"])
def dashboard_asset(name: str) -> Response:
    return static_answer(assets.asset(name), query().get("v"))


@app.route("/openapi.json", methods=["GET"])
def openapi_document() -> dict[str, Any]:
    return document.document()


def static_answer(asset: Asset, version: str | None = None) -> Response:
    status, headers, body = asset.answer(request().headers.get("if-none-match"), version)
    return Response(body=body, status_code=status, headers=headers)


@app.route("/counters", methods=["GET"], authorizer=read_key)
def list_counters() -> dict[str, Any]:
    return chalicelib.counters.catalog.listing(aws.dynamodb, settings, query(), clock.now_ms())


@app.route("/views/urls", methods=["GET"], authorizer=read_key)
def list_view_urls() -> dict[str, Any]:
    return chalicelib.views.catalog.listing(aws.dynamodb, settings, query(), clock.now_ms())


@app.schedule(Rate(settings.catalog_fold_minutes, unit=Rate.MINUTES))
def fold_catalogs(event: Any) -> dict[str, Any]:
    # The listings' logged names into their pages (core/catalog.py).
    return fold_all(
        aws.dynamodb, settings, (chalicelib.counters.catalog.KIND, chalicelib.views.catalog.KIND), clock.now_ms()
    )


@app.route("/quarantine/counts", methods=["GET"], authorizer=admin_key)
def get_quarantine_counts() -> dict[str, Any]:
    return {"sources": quarantine.counts(aws.dynamodb, aws.sqs, settings)}


def report_csv(report_id: str) -> Response:
    body = chalicelib.reports.api.get_report_csv(aws.dynamodb, aws.s3, settings, report_id)
    headers: dict[str, str | list[str]] = {
        "Content-Type": "text/csv; charset=utf-8",
        "Content-Disposition": f'attachment; filename="{report_id}.csv"',
    }
    return Response(body=body, status_code=200, headers=headers)


# Keep last: every route declared above maps Tally's exceptions (answers), and every path answers
# a CORS preflight.
for _path, _entries in list(app.routes.items()):
    for _entry in _entries.values():
        _entry.view_function = answers(_entry.view_function)
    if "OPTIONS" not in _entries:
        app.route(_path, methods=["OPTIONS"])(preflight)
