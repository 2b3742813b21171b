"""What every handler tells an operator, its log lines and metrics: docs/deploy.md, "Logs" (why one EMF
provider per invocation) and "Metrics"."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider

NAMESPACE = "Tally"
SERVICE = "tally"
# The one dimension of every metric: the Lambda function's name (unique per stage on AWS).
DIMENSION = "function"

# BatchResult fields (and details) -> metric names. Zeros are emitted too: an alarm on a sum
# needs data points, and "0 duplicates" is an answer.
BATCH_METRICS: dict[str, str] = {
    "records": "Records",
    "counted": "Counted",
    "duplicates": "Duplicates",
    "quarantined": "Quarantined",
    "failed": "Failed",
    "transactions": "Transactions",
    "retries": "TransactionRetries",
}
# Emitted only by the sources that have them (what each means: docs/deploy.md, "Metrics").
DETAIL_METRICS: dict[str, str] = {
    "dead_lettered": "DeadLettered",
    "conflicts": "SketchWriteConflicts",
    "expired": "Expired",
    "redelivered": "Redelivered",
    "out_of_sequence": "OutOfSequence",
}
# How old the newest record of a batch was when the handler finished with it.
LAG_METRICS = {"aws:dynamodb": "StreamLag", "aws:sqs": "QueueLag"}


class _CurrentStdout(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever sys.stdout is now (tests and the local stack swap it)."""

    @property
    def stream(self) -> Any:
        return sys.stdout

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


logger = Logger(service=SERVICE, logger_handler=_CurrentStdout())
_write_lock = threading.Lock()


def middleware(event: Any, get_response: Callable[[Any], Any]) -> Any:
    """Chalice middleware ("all"): HTTP failures and background invocations."""
    if hasattr(event, "method") and hasattr(event, "headers"):  # chalice.app.Request
        return _http(event, get_response)
    if isinstance(getattr(event, "event", None), Mapping) and "http" in event.event.get("requestContext", {}):
        # A function URL's request: the route it is handed to logs it as any request (failures only).
        return get_response(event)
    return _background(event, get_response)


def _http(request: Any, get_response: Callable[[Any], Any]) -> Any:
    started = time.monotonic()
    response = get_response(request)
    status = int(getattr(response, "status_code", 200))
    if status >= 400:
        body = response.body if isinstance(response.body, Mapping) else {}
        context = request.context or {}
        fields = {
            "function": _function_name(getattr(request, "lambda_context", None), "api_handler"),
            "request_id": context.get("requestId", ""),
            "route": context.get("resourcePath", ""),
            "method": request.method,
            "status": status,
            "code": str(body.get("Code", "")),
            "duration_ms": _elapsed_ms(started),
        }
        (logger.error if status >= 500 else logger.warning)("request failed", extra=fields)
    return response


def _background(event: Any, get_response: Callable[[Any], Any]) -> Any:
    started = time.monotonic()
    raw = event.to_dict() if hasattr(event, "to_dict") else {}
    identity = invocation_identity(raw, getattr(event, "context", None))
    try:
        result = get_response(event)
    except Exception as exc:
        logger.exception(
            "invocation failed", extra={**identity, "duration_ms": _elapsed_ms(started), "error": type(exc).__name__}
        )
        raise
    line = invocation_line(identity, result, raw, _elapsed_ms(started), time.time())
    with _write_lock:  # one line, whole, even when handlers run in threads (the local stack)
        sys.stdout.write(json.dumps(line, separators=(",", ":"), default=str) + "\n")
        sys.stdout.flush()
    return result


def _elapsed_ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 1)


def _function_name(context: Any, default: str) -> str:
    return str(getattr(context, "function_name", "") or default)


def invocation_identity(raw: Mapping[str, Any], context: Any) -> dict[str, Any]:
    """Who and what: function, request id, the batch's size and first/last record ids."""
    records = raw.get("Records") or []
    ids = [str(r.get("eventID") or r.get("messageId") or "") for r in records if isinstance(r, Mapping)]
    identity: dict[str, Any] = {
        "function": _function_name(context, "unknown"),
        "request_id": str(getattr(context, "aws_request_id", "") or ""),
    }
    if ids:
        identity.update(first_record=ids[0], last_record=ids[-1])
    elif raw.get("id"):  # a scheduled event
        identity["event_id"] = str(raw["id"])
    return identity


def invocation_line(
    identity: Mapping[str, Any], result: Any, raw: Mapping[str, Any], duration_ms: float, now_s: float
) -> dict[str, Any]:
    """The EMF document for one successful invocation: metrics plus the log fields."""
    provider = AmazonCloudWatchEMFProvider(
        namespace=NAMESPACE, metric_set={}, dimension_set={}, metadata_set={}, default_dimensions={}
    )
    provider.add_dimension(DIMENSION, str(identity["function"]))
    values = result if isinstance(result, Mapping) else {}
    if isinstance(values.get("state"), Mapping):  # a tumbling-window answer: the counts are its state
        values = values["state"]
    for name, value in metric_values(values, raw, now_s).items():
        unit = MetricUnit.Milliseconds if name in LAG_METRICS.values() else MetricUnit.Count
        provider.add_metric(name=name, unit=unit, value=value)
    if not provider.metric_set:
        provider.add_metric(name="Invocations", unit=MetricUnit.Count, value=1)
    provider.set_timestamp(int(now_s * 1000))
    return {
        **provider.serialize_metric_set(),
        "level": "INFO",
        "service": SERVICE,
        "message": "invocation",
        **{k: v for k, v in identity.items() if k != DIMENSION},
        "duration_ms": duration_ms,
        "counts": {k: v for k, v in values.items() if isinstance(v, int | float) and not isinstance(v, bool)},
    }


def metric_values(result: Mapping[str, Any], raw: Mapping[str, Any], now_s: float) -> dict[str, float]:
    """Metric name -> value for what a handler returned (pure)."""
    if "reports" in result:  # a report run
        reports = [r for r in result.get("reports") or [] if isinstance(r, Mapping)]
        return {
            "ReportRuns": 1,
            "ReportsWritten": len(reports),
            "EventsReported": sum(int(r.get("events", 0)) for r in reports),
            "ReportRunsSuperseded": int(bool(result.get("superseded"))),
        }
    if "audited" in result:  # an audit run (counters/audit_runs.py)
        return {
            "AuditRuns": 1,
            "PartitionsAudited": float(result.get("audited", 0)),
            "Shortfall": float(result.get("shortfall", 0)),
            "ShortPartitions": float(len(result.get("short") or [])),
            "OpenFindings": float(result.get("open", 0)),
            "AuditRunsSuperseded": int(bool(result.get("superseded"))),
        }
    if "folded" in result:  # the listings' fold (core/catalog.py)
        folds = [f for f in (result.get("folded") or {}).values() if isinstance(f, Mapping)]
        return {
            "CatalogFolds": 1,
            "CatalogLogsFolded": float(sum(int(f.get("logs", 0)) for f in folds)),
            "CatalogPagesWritten": float(sum(int(f.get("pages_written", 0)) for f in folds)),
            "CatalogFoldRaces": float(sum(1 for f in folds if f.get("raced"))),
        }
    values: dict[str, float] = {}
    if "records" in result:
        values.update({name: float(result.get(key, 0)) for key, name in BATCH_METRICS.items()})
        values.update({name: float(result[key]) for key, name in DETAIL_METRICS.items() if key in result})
    return values | newest_record_age_ms(raw, now_s)


def newest_record_age_ms(raw: Mapping[str, Any], now_s: float) -> dict[str, float]:
    """{metric: age in ms} of the newest record in a stream or queue batch, or {}."""
    created: list[float] = []
    source = ""
    for record in raw.get("Records") or []:
        if not isinstance(record, Mapping):
            continue
        source = str(record.get("eventSource", ""))
        with suppress(KeyError, TypeError, ValueError):  # a record it cannot date is skipped
            if source == "aws:dynamodb":
                created.append(float(record["dynamodb"]["ApproximateCreationDateTime"]))
            elif source == "aws:sqs":
                created.append(float(record["attributes"]["SentTimestamp"]) / 1000)
    if not created or source not in LAG_METRICS:
        return {}
    return {LAG_METRICS[source]: round(max(0.0, now_s - max(created)) * 1000, 1)}
