"""Schemathesis hooks (tests/schemathesis.toml names this module): what the OpenAPI document
cannot state, applied only to the requests Schemathesis generates as valid (positive cases), so
that its positive-data check judges what the document can say and nothing else.

Each rule relates a parameter to the clock or to another parameter, which JSON Schema cannot:

- a cursor is opaque: the only valid ones are those a listing answered, so a generated one is
  dropped (no cursor: the first page); negative cases keep theirs, which must be refused;
- times relative to now: a body's `time` is at most MAX_FUTURE_SKEW_SECONDS ahead, a page view
  at most a day old, a view younger than the horizon; a time outside [now - 23 h, now + 4 min]
  is moved to a minute ago, written in the form it was generated in (epoch ms, digits, or
  ISO-8601 with the same offset);
- `start` is not after `end` (default now), and the window they make is not longer than the
  route allows (400 days; a histogram's bucket cap at its resolution); a start outside that is
  moved to fit, in its own form;
- `where` names each dimension once, and with a breakdown's `by` at most two dimensions (every
  pair is counted: FILTER_PAIRS, a deployment setting, is left at its default);
- a union reads at most uniques.api.MAX_KEYS_READ sketches: names times the window's days;
- a read that means all time without a window (GET /views, GET /hyperloglog/{name}) takes
  `compare` and a view series' `resolution` only with one, and a view series keeps within the
  histogram's bucket cap as a histogram does;
- a report id ends after it starts; a repair's partition is of a settled quarter hour and a
  write shard below EVENT_WRITE_SHARDS (a deployment setting the document does not know);
- a page view's custom event counter `site-event:<site>:<event>` is at most 200 characters;
- a zone (`tz`, a site's `timezone`) is one the tz database names: the document gives zones by
  their spelling, so a generated name it lacks becomes a real zone.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from typing import Any

import schemathesis
from schemathesis import Case
from schemathesis.hooks import HookContext

from chalicelib.access import api_keys
from chalicelib.core import times, window_params, zones
from chalicelib.core.errors import ValidationError
from chalicelib.core.settings import Settings
from chalicelib.counters import audit, filters
from chalicelib.sites import names as site_keys
from chalicelib.uniques import api as uniques_api

SETTINGS = Settings()
# What every body time may be, whichever route: the tightest of their bounds, with a margin.
OLDEST_MS = 23 * times.HOUR_MS
NEWEST_MS = 4 * times.MINUTE_MS
COUNTER_MAX_CHARS = 200
ALL_TIME_READS = ("/views", "/hyperloglog/{name}", "/hyperloglog")
# The longest window between `start` and `end`, in minutes (with a bucket's margin for alignment).
LONGEST_MINUTES = window_params.MAX_WINDOW_MINUTES - 2 * 1440
HISTOGRAM_MINUTES = {
    "minute": window_params.MAX_HISTOGRAM_BUCKETS - 2,
    "hour": (window_params.MAX_HISTOGRAM_BUCKETS - 2) * 60,
    "day": LONGEST_MINUTES,
    "week": LONGEST_MINUTES,
    "month": LONGEST_MINUTES,
}


@schemathesis.hook
def before_add_examples(context: HookContext, examples: list[Case]) -> None:
    """The document's examples are fixed times: they get the same treatment."""
    for case in examples:
        map_case(context, case)


@schemathesis.hook
def before_call(context: HookContext, case: Case, **kwargs: Any) -> None:
    """Schemathesis draws inputs from earlier answers too (its extra data sources, on by default),
    and GET /keys lists the run's own keys: a DELETE /keys/{key_id} drawn from that list would
    revoke the key the run authenticates with half-way through. Those ids become an unknown one
    (a 404, which the document states); any other key the run created may still be revoked."""
    if case.method.upper() == "DELETE" and case.path_parameters.get("key_id") in _own_key_ids():
        case.path_parameters["key_id"] = "0" * 16


def _own_key_ids() -> set[str]:
    keys = (os.environ.get(name) for name in ("TALLY_ADMIN_KEY", "TALLY_BEACON_KEY"))
    return {api_keys.key_id(api_keys.digest(key)) for key in keys if key}


@schemathesis.hook
def map_case(context: HookContext, case: Case) -> Case:
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return case
    try:
        _fit(case)
    except (ValidationError, ValueError, TypeError):
        pass  # not a value the document admits either: the check judges it as generated
    return case


def _fit(case: Case) -> None:
    now = int(time.time() * 1000)
    path = case.operation.path
    if isinstance(case.query, dict):
        case.query.pop("cursor", None)
        _zone(case.query, "tz")
        _where(case.query, path)
        if path in ALL_TIME_READS and not window_params.is_windowed(case.query):
            for name in ("compare", "resolution"):
                case.query.pop(name, None)
        span_minutes = _window(case.query, path, now)
        if path == "/hyperloglog" and "names" in case.query:
            _union(case.query, span_minutes)
    if isinstance(case.body, dict):
        for item in case.body.get("events") or case.body.get("views") or [case.body]:
            if isinstance(item, dict) and item.get("time") is not None:
                item["time"] = _recent(item["time"], now)
        _zone(case.body, "timezone")
        if path == "/beacon/pageview":
            _pageview(case.body)
        if path == "/audit/repair" and isinstance(case.body.get("partition"), str):
            case.body["partition"] = _settled(case.body["partition"], now)
    if path == "/reports/{report_id}" and isinstance(case.path_parameters, dict):
        report_id = case.path_parameters["report_id"]
        case.path_parameters["report_id"] = _ordered(report_id)
        if "." in report_id and isinstance(case.query, dict):  # the suffix names the format
            case.query["format"] = report_id.rsplit(".", 1)[1]


def _zone(where: dict[str, Any], name: str) -> None:
    value = where.get(name)
    if isinstance(value, str) and value not in zones.names():
        known = sorted(zones.names())
        where[name] = known[sum(value.encode()) % len(known)]


def _ms(value: Any) -> int:
    if isinstance(value, float) and value.is_integer():  # a JSON integer written 5.0
        value = int(value)
    return times.parse(value)


def _written_as(original: Any, t_ms: int) -> Any:
    """`t_ms` in the form `original` was: an integer, digits, or ISO-8601 in its offset."""
    if not isinstance(original, str):
        return type(original)(t_ms)
    if original.strip().isdigit():
        return str(t_ms)
    zone = datetime.fromisoformat(original).tzinfo or UTC
    return datetime.fromtimestamp(t_ms / 1000, UTC).astimezone(zone).isoformat(timespec="milliseconds")


def _recent(value: Any, now: int) -> Any:
    t_ms = _ms(value)
    return value if now - OLDEST_MS <= t_ms <= now + NEWEST_MS else _written_as(value, now - times.MINUTE_MS)


def _window(query: dict[str, Any], path: str, now: int) -> int:
    """Make `start` fit before `end`; the window's length in minutes."""
    if "start" not in query:
        window = query.get("window", window_params.DEFAULT_WINDOW)
        if window in zones.CALENDAR_LONGEST_MINUTES:
            minutes = zones.CALENDAR_LONGEST_MINUTES[window]
        else:
            digits, unit = int(str(window)[:-1]), str(window)[-1]
            minutes = digits * {"m": 1, "h": 60, "d": 1440}[unit]
        if path == "/views" and "resolution" in query and minutes > HISTOGRAM_MINUTES[str(query["resolution"])]:
            minutes = HISTOGRAM_MINUTES[str(query["resolution"])]
            query["window"] = f"{minutes}m"
        return minutes
    longest = LONGEST_MINUTES
    if path.endswith("/histogram"):
        longest = HISTOGRAM_MINUTES[str(query.get("resolution", "hour" if path.startswith("/counters") else "day"))]
    elif path == "/views" and "resolution" in query:
        longest = HISTOGRAM_MINUTES[str(query["resolution"])]
    end = _ms(query["end"]) if "end" in query else now
    start = _ms(query["start"])
    if not 0 <= end - start <= longest * times.MINUTE_MS:
        fitted = end - min(abs(end - start), longest * times.MINUTE_MS)
        query["start"] = _written_as(query["start"], fitted if fitted >= times.MIN_TIME_MS else end)
    return (end - _ms(query["start"])) // times.MINUTE_MS + 1


def _where(query: dict[str, Any], path: str) -> None:
    """Each dimension named once, and with a breakdown's `by` at most MAX_WHERE dimensions in all."""
    clauses = query.get("where")
    if not isinstance(clauses, list):
        return
    named = {str(query["by"])} if path.endswith("/breakdown") and "by" in query else set()
    kept = []
    for clause in clauses:
        name = str(clause).split(":", 1)[0]
        if name in named and not (path.endswith("/breakdown") and name == query.get("by")):
            continue
        if len(named | {name}) > filters.MAX_WHERE:
            continue
        named.add(name)
        kept.append(clause)
    query["where"] = kept


def _union(query: dict[str, Any], span_minutes: int) -> None:
    """At most MAX_KEYS_READ sketches: per name a day's for each day, and the hours of two partial days."""
    per_name = span_minutes // 1440 + 2 + 2 * 24
    names = list(dict.fromkeys(part.strip() for part in str(query["names"]).split(",")))
    query["names"] = ",".join(names[: max(1, uniques_api.MAX_KEYS_READ // per_name)])


def _pageview(body: dict[str, Any]) -> None:
    event, url = body.get("event"), body.get("url")
    if not isinstance(event, str) or not isinstance(url, str):
        return
    site = body.get("site") or url.split("://", 1)[1].split("/")[0].split("?")[0].split("#")[0].split(":")[0].lower()
    room = COUNTER_MAX_CHARS - len(site_keys.event_counter(site, ""))
    body["event"] = event[: max(1, room)]


def _settled(partition: str, now: int) -> str:
    quarter, shard = partition.split("#")
    if audit.quarter_of(partition) + audit.QUARTER_MS > audit.settled_before(now, SETTINGS.audit_settle_minutes):
        quarter = times.quarter_hour(now - times.DAY_MS)
    return f"{quarter}#{int(shard) % SETTINGS.event_write_shards}"


def _ordered(report_id: str) -> str:
    """A report id whose end is after its start (the end moved a millisecond past the start)."""
    stem, dot, suffix = report_id.partition(".")
    first, last = stem.split("-")
    start = times.parse_compact(first[:15], first[15:18])
    if times.parse_compact(last[:15], last[15:18]) <= start:
        stem = f"{first}-{times.compact(start + 1)}"
    return stem + dot + suffix
