"""JSON Schema building blocks of the contract, each from the constant that the validation code checks. Pure. How
they are written and why: docs/api.md, "The contract"."""

from __future__ import annotations

import re
from typing import Any

from chalicelib.access import api_keys, policy, tracker
from chalicelib.core import inputs, pager, quarantine, times, validation, window_params, zones
from chalicelib.core.settings import Settings
from chalicelib.counters import audit_items, filters, replay
from chalicelib.events import dimensions as event_dimensions
from chalicelib.events import ingest
from chalicelib.reports import api as reports_api
from chalicelib.uniques import api as uniques_api
from chalicelib.uniques import batches as uniques_batches
from chalicelib.uniques import sketches
from chalicelib.views import top as view_top
from chalicelib.views import validation as view_input

Schema = dict[str, Any]
DEFAULTS = Settings()


def anchored(pattern: re.Pattern[str] | str) -> str:
    text = pattern.pattern if isinstance(pattern, re.Pattern) else pattern
    return f"^(?:{text})$"


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def string(**more: Any) -> Schema:
    return {"type": "string", **more}


def array(items: Schema, **more: Any) -> Schema:
    return {"type": "array", "items": items, **more}


def integer(low: int, high: int, **more: Any) -> Schema:
    return {"type": "integer", "minimum": low, "maximum": high, **more}


def nullable(schema: Schema, **more: Any) -> Schema:
    return {"anyOf": [schema, {"type": "null"}], **more}


def obj(required: dict[str, Schema], optional: dict[str, Schema] | None = None, closed: bool = False) -> Schema:
    """An object with these properties; `closed` when the API refuses any other field."""
    schema: Schema = {"type": "object", "properties": {**required, **(optional or {})}, "required": list(required)}
    return {**schema, "additionalProperties": False} if closed else schema


COUNT = {"type": "integer", "minimum": 0}
RATE = {"type": "number", "minimum": 0}
BOOLEAN = {"type": "boolean"}
NEXT = nullable(string(description="the cursor of the next page; null on the last page"))


def listing(field: str, item: Schema) -> Schema:
    """A page of a listing: its entries under `field` and the cursor of the next page."""
    return obj({field: array(item), "next": NEXT})


ISO_TIME = string(
    format="date-time",
    description="ISO-8601 UTC with milliseconds, as Tally writes times; with `tz`, local time with its offset",
)
NAME = string(
    pattern=anchored(validation.NAME_PATTERN),
    minLength=1,
    maxLength=200,
    description="a counter or unique-count name",
    examples=["signups"],
)


def integers(low: int, high: int) -> str:
    """A regular expression matching the decimal integers low..high (0 <= low <= high), written
    without leading zeros: JSON Schema bounds numbers, not digits in text."""

    def between(lo: str, hi: str) -> list[str]:  # as many digits each
        if lo == hi:
            return [lo]
        if len(lo) == 1:
            return [f"[{lo}-{hi}]"]
        if lo[0] == hi[0]:
            return [lo[0] + rest for rest in between(lo[1:], hi[1:])]
        width = len(lo) - 1
        low_full, high_full = lo[1:] == "0" * width, hi[1:] == "9" * width
        parts = [] if low_full else [lo[0] + rest for rest in between(lo[1:], "9" * width)]
        first, last = int(lo[0]) + (0 if low_full else 1), int(hi[0]) - (0 if high_full else 1)
        if first <= last:
            parts.append(f"[{first}-{last}][0-9]{{{width}}}")
        if not high_full:
            parts += [hi[0] + rest for rest in between("0" * width, hi[1:])]
        return parts

    parts: list[str] = []
    for width in range(len(str(low)), len(str(high)) + 1):
        smallest = 10 ** (width - 1) if width > 1 else 0
        parts += between(str(max(low, smallest)), str(min(high, 10**width - 1)))
    return "(?:" + "|".join(parts) + ")"


# A name in a path leaves out `:`, which a client percent-encodes there: docs/tracker.md, "What you see".
PATH_NAME = {
    **NAME,
    "pattern": anchored(validation.NAME_PATTERN.pattern.replace(":", "")),
    "description": "a counter or unique-count name; a `:` in it is sent unencoded (percent-encoded, it is "
    "not a name's character)",
}


# Times as times.parse takes them; why the text form spells out its dates: docs/api.md, "Conventions".
_D31, _D30, _D28 = "(?:0[1-9]|[12][0-9]|3[01])", "(?:0[1-9]|[12][0-9]|30)", "(?:0[1-9]|1[0-9]|2[0-8])"
_SHORT = "(?:0[469]|11)SEP" + _D30 + "|02SEP" + _D28
_MONTH_DAY = f"(?:(?:0[13578]|1[02])SEP{_D31}|{_SHORT})"
_NOT_JAN_1 = f"(?:01SEP(?:0[2-9]|[12][0-9]|3[01])|(?:0[3578]|1[02])SEP{_D31}|{_SHORT})"
_NOT_DEC_31 = f"(?:(?:0[13578]|10)SEP{_D31}|12SEP{_D30}|{_SHORT})"
_LEAP_DAY = "20(?:[02468][048]|[13579][26])SEP02SEP29"
_COMPACT_DATE = f"(?:20[0-9]{{2}}SEP{_MONTH_DAY}|{_LEAP_DAY})".replace("SEP", "")  # every real YYYYMMDD of 2000-2099
_HOUR_MINUTE = "(?:[01][0-9]|2[0-3]):[0-5][0-9]"
_CLOCK = rf"{_HOUR_MINUTE}:[0-5][0-9](?:\.[0-9]{{1,9}})?"
_ANY_OFFSET_DATE = (
    f"(?:20(?:0[1-9]|[1-8][0-9]|9[0-8])SEP{_MONTH_DAY}|{_LEAP_DAY}|2000SEP{_NOT_JAN_1}|2099SEP{_NOT_DEC_31})"
).replace("SEP", "-")
ISO_TIME_PATTERN = (
    f"(?:{_ANY_OFFSET_DATE}T{_CLOCK}(?:Z|[+-]{_HOUR_MINUTE})"
    f"|2000-01-01T{_CLOCK}(?:Z|[+-]00:00|-{_HOUR_MINUTE})"
    rf"|2099-12-31T{_CLOCK}(?:Z|[+-]00:00|\+{_HOUR_MINUTE}))"
)
TIME_DIGITS = "0*" + integers(times.MIN_TIME_MS, times.MAX_TIME_MS - 1)
TIME_RANGE = "from 2000-01-01 to 2100-01-01 UTC"
TIME_MS = integer(times.MIN_TIME_MS, times.MAX_TIME_MS - 1, description="epoch milliseconds")
TIME_ISO_TEXT = string(
    format="date-time",
    pattern=anchored(ISO_TIME_PATTERN),
    maxLength=times.TIME_MAX_CHARS,
    description=f"an ISO-8601 time with a zone (Z or +hh:mm), {TIME_RANGE}",
)
TIME_DIGITS_TEXT = string(
    pattern=anchored(TIME_DIGITS),
    maxLength=times.TIME_DIGITS_MAX,
    description=f"epoch milliseconds in ASCII digits, {TIME_RANGE}",
)
BODY_TIME: Schema = {"anyOf": [TIME_MS, TIME_ISO_TEXT, TIME_DIGITS_TEXT], "examples": ["2026-11-18T10:00:00Z"]}
AHEAD = f"at most MAX_FUTURE_SKEW_SECONDS ({DEFAULTS.max_future_skew_seconds} s) ahead"
OPTIONAL_TIME = {"anyOf": [*BODY_TIME["anyOf"], {"type": "null"}], "examples": BODY_TIME["examples"]}


def query_text(**more: Any) -> Schema:
    """A query parameter's value: every one is text of at most inputs.MAX_QUERY_CHARS characters."""
    return string(**{"maxLength": inputs.MAX_QUERY_CHARS, **more})


def duration(most_minutes: int) -> Schema:
    """A `window`: validation.DURATION_PATTERN's minutes, hours or days, 1 to `most_minutes` minutes."""
    units = [(integers(1, most_minutes // size), unit) for unit, size in validation.DURATION_MINUTES.items()]
    return string(
        pattern=anchored("0*(?:" + "|".join(f"{digits}{unit}" for digits, unit in units) + ")"),
        maxLength=validation.DURATION_DIGITS + 1,
        description=f"a duration ending at `end` (default now): minutes, hours or days, at most "
        f"{most_minutes // 1440} days ({most_minutes} minutes)",
        examples=["24h", "90m", "7d"],
    )


WINDOW = duration(window_params.MAX_WINDOW_MINUTES)
QUERY_TIME = {"anyOf": [TIME_ISO_TEXT, TIME_DIGITS_TEXT], "examples": BODY_TIME["examples"]}
END = {**QUERY_TIME, "description": "the window's end (default now); with `start`, the last minute counted"}
START = {
    **QUERY_TIME,
    "description": "the first minute counted, not after `end` (default now), at most "
    f"{window_params.MAX_WINDOW_DAYS} days before it",
}


def without(*names: str) -> Schema:
    """A schema refusing an object that has any of these properties."""
    return {"not": {"anyOf": [{"required": [name]} for name in names]}}


ZONE = string(
    pattern=f"^[A-Za-z][A-Za-z0-9_+/-]{{0,{zones.ZONE_MAX_CHARS - 1}}}$",
    default=zones.DEFAULT_ZONE,
    description="an IANA time-zone name, as the tz database (the `tzdata` package) spells it: buckets and "
    "calendar windows on its clock, and the answer's times in its local time with offset (docs/api.md, "
    "Time zones, calendar windows and comparisons); any other name is a 400",
    examples=["Europe/Berlin"],
)
COMPARE = string(
    enum=list(zones.COMPARISONS),
    description="adds `previous`: the same answer over the period before (a calendar window's previous "
    "period) or a year before",
)


def calendar_or_duration(most_minutes: int) -> Schema:
    """A `window`: a duration of at most `most_minutes`, or a calendar window no longer than that."""
    calendar = [w for w, longest in zones.CALENDAR_LONGEST_MINUTES.items() if longest <= most_minutes]
    return {"anyOf": [duration(most_minutes), string(enum=calendar, description="a calendar window in `tz`")]}


LONGEST_WINDOW = calendar_or_duration(window_params.MAX_WINDOW_MINUTES)


def windowed(most_minutes: dict[str, int] | None = None, default: str | None = None, **more: Schema) -> Schema:
    """A windowed read's parameters, and `more`, as one open object (docs/api.md, "The contract"); with
    `most_minutes`, `resolution` too (`default` when none is given), each with its longest `window`."""
    every: dict[str, Schema] = {"end": END, "tz": ZONE, "compare": COMPARE, **more}
    resolution = {"resolution": string(enum=list(most_minutes), default=default)} if most_minutes else {}
    shapes: list[Schema] = []
    for name, most in (most_minutes or {"": window_params.MAX_WINDOW_MINUTES}).items():
        chosen = {"resolution": string(const=name)} if name else {}
        required, optional = ({}, chosen) if name == default else (chosen, {})  # the default may go unnamed
        shapes.append(
            {**obj(required, {"window": calendar_or_duration(most), **every, **optional}), **without("start")}
        )
    shapes.append({**obj({"start": START}, {**every, **resolution}), **without("window")})
    return {
        "type": "object",
        "properties": {"window": LONGEST_WINDOW, "start": START, **every, **resolution},
        "anyOf": shapes,
        "description": "`window` (with `end`) or `start` (with `end`), not both",
        "examples": [{"window": "24h"}],
    }


LIMIT = integer(1, pager.MAX_LIMIT, default=pager.DEFAULT_LIMIT)
CURSOR = query_text(
    maxLength=pager.MAX_CURSOR_CHARS, description="the `next` of the previous page, unchanged (absent: first page)"
)
UNION_NAMES = query_text(
    pattern=anchored(
        f"{validation.NAME_PATTERN.pattern}(?:,{validation.NAME_PATTERN.pattern}){{0,{uniques_api.MAX_UNION_NAMES - 1}}}"
    ),
    description=f"comma-separated names, at most {uniques_api.MAX_UNION_NAMES}",
    examples=["visitors,signups"],
)


def union_or_listing() -> Schema:
    """GET /hyperloglog's query: `names` with an optional window, or a page of names with none."""
    union = windowed(names=UNION_NAMES)
    for shape in union["anyOf"]:
        shape["required"] = ["names", *shape["required"]]
    page = {**obj({}, {"limit": LIMIT, "cursor": CURSOR}), **without("names", "window", "start", "end")}
    return {
        "type": "object",
        # A union ignores `limit` and `cursor`: only a page of names bounds them.
        "properties": {**union["properties"], "limit": query_text(), "cursor": query_text()},
        "anyOf": [*union["anyOf"], page],
        "description": "`names` (with `window` and `end`, or `start` and `end`), or `limit` and `cursor`",
        "examples": [{"names": "visitors,signups", "window": "24h"}, {"limit": 100}],
    }


COUNTER_RESOLUTIONS = list(zones.NOMINAL_MINUTES)
UNIQUE_RESOLUTIONS = list(uniques_api.RESOLUTIONS)
SCOPE = string(enum=list(policy.SCOPES))
KEY_ID = string(pattern=anchored(api_keys.ID_PATTERN))
# A report id as reports.ranges writes one: two compact UTC times (real ones), the second later.
_COMPACT_TIME = _COMPACT_DATE + "T(?:[01][0-9]|2[0-3])[0-5][0-9][0-5][0-9][0-9]{3}Z"
REPORT_ID = string(pattern=anchored(f"{_COMPACT_TIME}-{_COMPACT_TIME}"))
REPORT_PATH_ID = string(
    pattern=anchored(f"{_COMPACT_TIME}-{_COMPACT_TIME}(?:" + "|".join(rf"\.{f}" for f in reports_api.FORMATS) + ")?"),
    description="a report id as GET /reports lists it (its end after its start), optionally ending in .json or .csv",
    examples=["20261121T230000000Z-20261122T000000000Z"],
)

DIMENSION_NAME = string(
    pattern=anchored(event_dimensions.NAME_PATTERN),
    minLength=1,
    maxLength=event_dimensions.NAME_MAX_CHARS,
    description="a dimension or value name",
)


def by_name(values: Schema, **more: Any) -> Schema:
    """An object of dimension or value names, each holding one of `values`."""
    return {"type": "object", "propertyNames": DIMENSION_NAME, "additionalProperties": values, **more}


# -- numbers -------------------------------------------------------------------------------------

VALUE = {
    "type": "number",
    "exclusiveMinimum": -(10**event_dimensions.VALUE_INTEGER_DIGITS),
    "exclusiveMaximum": 10**event_dimensions.VALUE_INTEGER_DIGITS,
    "multipleOf": float(event_dimensions.VALUE_STEP),
    "description": f"at most {event_dimensions.VALUE_INTEGER_DIGITS} digits before the decimal point and "
    f"{event_dimensions.VALUE_FRACTION_DIGITS} after it (trailing zeros are not digits: 1.50 is 1.5), so that "
    "its sums fit DynamoDB's 38 digits",
    "examples": [12.5],
}
# A number in an event's attributes as core/inputs.py takes it (its digit limit JSON Schema cannot state: said).
_MAGNITUDE = 10 ** (inputs.MAX_NUMBER_EXPONENT + 1)
_SMALLEST = float(f"1e{inputs.MIN_NUMBER_EXPONENT}")
ATTRIBUTE_NUMBER = {
    "anyOf": [
        {"const": 0},
        {"type": "number", "minimum": _SMALLEST, "exclusiveMaximum": _MAGNITUDE},
        {"type": "number", "maximum": -_SMALLEST, "exclusiveMinimum": -_MAGNITUDE},
    ],
    "description": f"a number DynamoDB stores: 0, or a magnitude from 1E{inputs.MIN_NUMBER_EXPONENT} to below "
    f"1E+{inputs.MAX_NUMBER_EXPONENT + 1} of at most {inputs.MAX_NUMBER_DIGITS} significant digits (trailing "
    f"zeros are not digits: 1.000 is 1, 0E+999 is 0; below 1E-128, no digit under 1E{inputs.MIN_DIGIT_EXPONENT})",
}
ATTRIBUTE_OBJECT = {"type": "object", "propertyNames": {"minLength": 1}, "additionalProperties": ref("AttributeValue")}
ATTRIBUTE_VALUE = {
    "anyOf": [
        {"type": ["string", "boolean", "null"]},
        ref("AttributeNumber"),
        array(ref("AttributeValue")),
        ATTRIBUTE_OBJECT,
    ],
    "description": "any JSON value; its numbers are DynamoDB's (AttributeNumber) and its keys at least one character",
}

# -- bodies --------------------------------------------------------------------------------------

EVENT = obj(
    {"counter": NAME},
    {
        "id": nullable(
            string(
                minLength=1,
                maxLength=ingest.ID_MAX_CHARS,
                description="a client id: a retried POST with the same id counts once (null or absent: one is made)",
            )
        ),
        "time": {**OPTIONAL_TIME, "description": f"when it happened (null or absent: now), {AHEAD}"},
        "retention": integer(
            ingest.MIN_RETENTION_SECONDS,
            ingest.MAX_RETENTION_SECONDS,
            default=DEFAULTS.default_retention_seconds,
            description="seconds the event is counted",
        ),
        "attributes": {
            **ATTRIBUTE_OBJECT,
            "description": f"at most {ingest.MAX_ATTRIBUTES_BYTES} bytes as JSON, nested at most "
            f"{inputs.MAX_STORED_DEPTH} levels, no empty key at any depth (DynamoDB's naming rule); "
            "numbers are DynamoDB's (AttributeNumber), stored in their shortest form, and summed in reports",
        },
        "dimensions": nullable(
            by_name(
                string(minLength=1, maxLength=event_dimensions.DIMENSION_VALUE_MAX_CHARS),
                maxProperties=event_dimensions.MAX_DIMENSIONS,
            ),
            description=f"at most {event_dimensions.MAX_DIMENSIONS} dimensions, each a string value: counts and sums "
            "are kept per value (GET /counters/{counter}/breakdown) and filter with `where`",
            examples=[{"provider": "p2", "region": "eu"}],
        ),
        "values": nullable(
            by_name(VALUE, maxProperties=event_dimensions.MAX_VALUES),
            description=f"at most {event_dimensions.MAX_VALUES} numbers, each summed exactly (in decimal) beside "
            "every count (`sums`)",
            examples=[{"amount": 12.5, "bytes": 1024}],
        ),
    },
    closed=True,
)


def one_or_batch(component: str, field: str, most: int) -> Schema:
    """A body of one item (a component) or of `{field: [1..most items]}`."""
    return {"anyOf": [ref(component), obj({field: array(ref(component), minItems=1, maxItems=most)}, closed=True)]}


EVENTS_BODY = one_or_batch("Event", "events", ingest.MAX_BATCH)


def _nonblank(max_chars: int) -> Schema:
    return string(minLength=1, maxLength=max_chars, pattern=view_input.NOT_BLANK)


VIEW = obj(
    {
        "url": _nonblank(view_input.URL_MAX_CHARS),
        "time": {
            **BODY_TIME,
            "description": "when the view happened: part of what makes it unique; younger than the horizon "
            f"(VIEW_HORIZON_SECONDS, {DEFAULTS.view_horizon_seconds // 86400} days by default) and {AHEAD}",
        },
        "clientId": _nonblank(view_input.CLIENT_ID_MAX_CHARS),
    },
    closed=True,
)
VIEWS_BODY = one_or_batch("View", "views", view_input.MAX_BATCH)
UNIQUE_ITEM = string(minLength=1, maxLength=uniques_api.MAX_ITEM_CHARS)
UNIQUE_ITEMS_BODY = obj(
    {"data": {"anyOf": [UNIQUE_ITEM, array(UNIQUE_ITEM, minItems=1, maxItems=uniques_batches.MAX_ITEMS)]}},
    {"time": {**OPTIONAL_TIME, "description": f"when the items were seen (null or absent: now), {AHEAD}"}},
    closed=True,
)
NEW_KEY_BODY = obj(
    {"scopes": array(SCOPE, minItems=1)},
    {
        "prefix": nullable(
            string(
                minLength=1,
                maxLength=policy.PREFIX_MAX_CHARS,
                pattern=anchored(policy.PREFIX_PATTERN.pattern.split("{")[0] + "+"),
                description="the key reaches only names (and URLs) starting with this (no control "
                "characters); null or absent: every name",
            )
        ),
        "origins": array(
            string(pattern=anchored(policy.ORIGIN_PATTERN)),
            maxItems=policy.MAX_ORIGINS,
            description="browser origins an ingest-only key works from",
        ),
        "sites": array(
            string(maxLength=tracker.SITE_MAX_CHARS, pattern=anchored(tracker.SITE_PATTERN)),
            minItems=1,
            maxItems=tracker.MAX_SITES,
            description="a tracker key's sites (required for one, for no other key): hostnames, `www.` "
            "matching too; `*.blog.example` for every subdomain",
        ),
        "rate_per_second": nullable(
            integer(
                policy.RATE_MIN,
                policy.RATE_MAX,
                description="requests a second the key may make (429 over it); absent or null: its scope's "
                "default " + ", ".join(f"{scope} {rate}" for scope, rate in policy.DEFAULT_RATES.items()),
            )
        ),
        "note": string(maxLength=policy.NOTE_MAX_CHARS),
    },
    closed=True,
)
# Origins limit ingest-only keys: with any origin, every scope is ingest. A tracker key has the
# tracker scope alone, sites and no prefix; no other key has sites.
_ONLY = {scope: {"scopes": {"items": {"const": scope}}} for scope in (policy.INGEST, policy.TRACKER)}
NEW_KEY_BODY["allOf"] = [
    {"anyOf": [{"properties": {"origins": {"maxItems": 0}}}, {"properties": _ONLY[policy.INGEST]}]},
    {
        "anyOf": [
            {
                "not": {"required": ["sites"]},
                "properties": {"scopes": {"not": {"contains": {"const": policy.TRACKER}}}},
            },
            {"required": ["sites"], "properties": {**_ONLY[policy.TRACKER], "prefix": {"type": "null"}}},
        ]
    },
]

# -- answers -------------------------------------------------------------------------------------

ERROR = {
    **obj({"Code": string(examples=["BadRequestError"]), "Message": string()}),
    "description": "Chalice's error shape; a 503 PartialWrite adds `stored` and `failed` ids",
}
COMPLETE = {**BOOLEAN, "description": "false when the window reaches past what is kept"}
RETENTION: dict[str, Schema] = {"complete": COMPLETE, "retained_from": ISO_TIME, "message": string()}
SPAN: dict[str, Schema] = {"start": ISO_TIME, "end": ISO_TIME}
WINDOW_ANSWER: dict[str, Schema] = {**SPAN, "keys_read": COUNT, "complete": COMPLETE}
SUMS = by_name({"type": "number"}, description="per value name, the exact sum of that value over the events counted")
SUMS_EXACT = by_name(
    string(pattern=r"^-?[0-9]+(\.[0-9]+)?$"),
    description="the same sums as decimal strings with every digit (JSON readers that parse numbers as doubles "
    "keep about 15 significant digits of `sums`)",
)
SUMMED: dict[str, Schema] = {"sums": SUMS, "sums_exact": SUMS_EXACT}
WHERE_ECHO = {"type": "object", "additionalProperties": string(), "description": "the filter applied"}
COUNT_ANSWER = obj(
    {"counter": NAME, "count": COUNT, **SUMMED, **WINDOW_ANSWER},
    {
        **RETENTION,
        "where": WHERE_ECHO,
        "sums_complete": {
            "type": "boolean",
            "enum": [False],
            "description": "present (false) when some events' values were not summed: a counter's hour or day "
            "sums at most 8 value names (docs/counting.md, Item sizes)",
        },
    },
)
BREAKDOWN_ANSWER = obj(
    {
        "counter": NAME,
        "by": DIMENSION_NAME,
        **WINDOW_ANSWER,
        "exact": {**BOOLEAN, "description": "true: the ranking, counts and sums are exact"},
        "values": array(obj({"value": string(), "count": {"type": "integer", "minimum": 1}, **SUMMED})),
        "others": obj(
            {
                "values": {**COUNT, "description": "distinct values not listed"},
                "count": {**COUNT, "description": "events not in the list (other values, or without the dimension)"},
            }
        ),
    },
    {
        **RETENTION,
        "where": WHERE_ECHO,
        "bound": {**COUNT, "description": "when not exact: the most events a value not listed can have in the window"},
    },
)
WHERE = array(
    query_text(pattern=r"^[A-Za-z0-9_.-]{1,64}:[\s\S]{1,128}$"),
    maxItems=filters.MAX_WHERE,
    description="name:value (the value may hold colons); repeatable, every clause must hold: "
    f"only the events having those dimension values (at most {filters.MAX_WHERE} clauses: filters are "
    "counted for single dimensions and pairs)",
    examples=[["provider:p2"]],
)
HISTOGRAM_ANSWER = obj(
    {
        "counter": NAME,
        "resolution": string(enum=COUNTER_RESOLUTIONS),
        **SPAN,
        "buckets": array(obj({"start": ISO_TIME, "count": COUNT, **SUMMED})),
        "complete": COMPLETE,
    },
    {**RETENTION, "where": WHERE_ECHO, "tz": string(description="the zone of the buckets")},
)


def compared(answer: Schema) -> Schema:
    """An answer with its `previous` (with `compare`): the same fields over the period compared with."""
    kept = {k: v for k, v in answer["properties"].items() if k not in window_params.IDENTITY_FIELDS}
    required = [k for k in answer["required"] if k in kept]
    previous = {**answer, "properties": kept, "required": required, "description": "with `compare`"}
    return {**answer, "properties": {**answer["properties"], "previous": previous}}


ESTIMATE: dict[str, Schema] = {
    **dict.fromkeys(("cardinality", "lower", "upper"), COUNT),
    "error_rate": RATE,
    "exact": BOOLEAN,
    **dict.fromkeys(("start", "end"), nullable(ISO_TIME)),
    "keys_read": COUNT,
    "complete": COMPLETE,
}
UNIQUE_COUNT_ANSWER = obj({"name": NAME, **ESTIMATE}, RETENTION)
UNION_ANSWER = obj({"names": array(NAME), **ESTIMATE}, RETENTION)
UNION_OR_NAMES = {"anyOf": [compared(UNION_ANSWER), listing("names", obj({"name": NAME, "last_seen": ISO_TIME}))]}
UNIQUE_HISTOGRAM_ANSWER = obj(
    {
        "name": NAME,
        "resolution": string(enum=UNIQUE_RESOLUTIONS),
        **SPAN,
        "additive": {"type": "boolean", "const": False},
        "buckets": array(obj({"start": ISO_TIME, "cardinality": COUNT, "exact": BOOLEAN})),
        "complete": COMPLETE,
    },
    {"aligned": string(), "retained_from": ISO_TIME},
)
VIEW_COUNT_ANSWER = obj({"url": string(), "views": COUNT}, {**WINDOW_ANSWER, **RETENTION})
VIEW_URL_QUERY = query_text(minLength=1, pattern=view_input.NOT_BLANK)
TOP_PREFIX = query_text(minLength=1, maxLength=view_input.URL_MAX_CHARS, pattern=view_input.NOT_BLANK)
TOP_LIMIT = integer(1, view_top.MAX_LIMIT, default=view_top.DEFAULT_LIMIT)
TOP_VIEWS_ANSWER = obj(
    {
        **WINDOW_ANSWER,
        "exact": {**BOOLEAN, "description": "true when no URL left out can have more views than the last one listed"},
        "bound": {**COUNT, "description": "the most views a URL not listed can have in the window"},
        "urls": array(obj({"url": string(), "views": COUNT})),
        "others": obj(
            {
                "urls": COUNT,
                "views": COUNT,
                "complete": {**BOOLEAN, "description": "false: at least these URLs and views"},
            }
        ),
    },
    {**RETENTION, "prefix": string()},
)
REPORT_SUMMARY = obj({"id": REPORT_ID, "start": ISO_TIME, "end": ISO_TIME, "events": COUNT})
# A report sums every numeric attribute, whatever its name.
SUMS_EXACT_ANY = {k: v for k, v in SUMS_EXACT.items() if k != "propertyNames"}
REPORT_COUNTER = obj({"events": {"type": "integer"}, "sums": {"type": "object"}, "sums_exact": SUMS_EXACT_ANY})
REPORT = obj({**REPORT_SUMMARY["properties"], "counters": {"type": "object", "additionalProperties": REPORT_COUNTER}})
REPORT_RUN = obj(
    {
        "reports": array(REPORT_SUMMARY),
        "superseded": {**BOOLEAN, "description": "another run committed the range this one read"},
        "more": {**BOOLEAN, "description": "the run read its budget before it reached now: run again"},
    }
)
KEY_RECORD = obj(
    {
        "id": KEY_ID,
        "scopes": array(SCOPE),
        "prefix": nullable(string()),
        **dict.fromkeys(("origins", "sites"), array(string())),
        "rate_per_second": integer(policy.RATE_MIN, policy.RATE_MAX),
        "note": string(),
        "created": ISO_TIME,
        "revoked": nullable(ISO_TIME),
    }
)
REPORT_LISTING = listing("reports", REPORT_SUMMARY)
KEY_LISTING = listing("keys", KEY_RECORD)
NEW_KEY = obj({**KEY_RECORD["properties"], "key": string(pattern=anchored(api_keys.KEY_PATTERN))})
QUARANTINE_RECORDS = listing(
    "records",
    obj(
        {
            "source": string(enum=list(quarantine.SOURCES)),
            "id": string(),
            "reason": string(),
            "seen_at": ISO_TIME,
            "record": string(maxLength=quarantine.MAX_RECORD_CHARS),
        }
    ),
)
QUARANTINE_COUNTS = obj(
    {"sources": array(obj({"source": string(), "records": COUNT, "complete": BOOLEAN}, {"approximate": BOOLEAN}))}
)
COUNTER_LISTING = listing("counters", obj({"name": NAME, "last_counted": ISO_TIME}))
URL_LISTING = listing("urls", obj({"url": string(), "views": COUNT, "last_counted": ISO_TIME}))
IDS = obj({"ids": array(string())})
ACCEPTED_VIEWS = obj({"accepted": {"type": "boolean", "const": True}})
ACCEPTED_ITEMS = obj({"accepted": integer(1, uniques_batches.MAX_ITEMS)})
OPENAPI = {"type": "object", "required": ["openapi", "paths"], "description": "this document"}


# -- the audit and replay (counters.audit_runs, counters.repair, counters.replay) ------------------

PARTITION = string(
    pattern=anchored(_COMPACT_DATE + "(?:[01][0-9]|2[0-3])(?:00|15|30|45)#[0-9]{1,3}"),
    description="an events partition: quarter hour of ingest (UTC, YYYYMMDDHHMM), `#`, write shard (below "
    "EVENT_WRITE_SHARDS); a repair takes one whose quarter hour has settled (AUDIT_SETTLE_MINUTES)",
)
AUDIT_FINDING = obj(
    {
        "partition": PARTITION,
        **dict.fromkeys(("stored", *audit_items.ACCOUNTS), COUNT),
        "shortfall": {"type": "integer", "description": "stored minus accounted; negative when over"},
    }
)
AUDIT_LISTING = listing(
    "partitions",
    obj(
        {"partition": PARTITION, "audited_at": ISO_TIME},
        {**dict.fromkeys(("stored", *audit_items.ACCOUNTS), COUNT), "shortfall": {"type": "integer"}},
    ),
)
AUDIT_RUN = obj(
    {
        "audited": COUNT,
        "shortfall": {"type": "integer"},
        "short": array(AUDIT_FINDING),
        **dict.fromkeys(("rechecked", "resolved", "open"), COUNT),
        "superseded": BOOLEAN,
        "checkpoint": nullable(ISO_TIME),
    }
)
REPAIR_BODY = obj({"partition": PARTITION}, closed=True)
REPAIR = obj(
    {
        "partition": PARTITION,
        **dict.fromkeys(("buckets", "written", "unchanged"), COUNT),
        "busy": array(
            obj(
                {"counter": NAME, "resolution": string(enum=["hour", "day"]), "start": ISO_TIME},
                {"where": WHERE_ECHO, "by": DIMENSION_NAME},
            )
        ),
        **dict.fromkeys(
            ("summaries", "summaries_written", "summaries_unchanged", "partitions_read", "events_read"), COUNT
        ),
        "accounted": BOOLEAN,
        "finding": nullable(AUDIT_FINDING),
    }
)
REPLAY_BODY = obj(
    {"source": string(enum=[replay.SOURCE])},
    {
        "ids": array(string(minLength=1, maxLength=1024), minItems=1, maxItems=replay.MAX_REPLAY),
        "limit": integer(1, replay.MAX_REPLAY),
    },
    closed=True,
)
REPLAY_BODY["not"] = {"required": ["ids", "limit"], "description": "ids or a limit, not both"}
REPLAY = obj({name: array(string()) for name in ("replayed", "already_counted", "expired", "still_bad", "not_found")})

# -- site analytics (sites/: the tracker's beacon, site summaries) ---------------------------------
# Bounds as sites/ declares them (beacon, names, settings; tests/functional/sites check they agree).
BEACON_WIDTH_MAX = 100_000
SITE_MAX_CHARS = 180
MAX_GOALS = 20
GOAL_NAME_MAX_CHARS = 60
GOAL_PAGE_MAX_CHARS = 128
# sites.privacy.page: an http(s) URL with a host; without `site`, the host is the site, so a name.
PAGE_URL = string(
    minLength=1,
    maxLength=view_input.URL_MAX_CHARS,
    pattern=rf"^https?://[A-Za-z0-9_.-]{{1,{SITE_MAX_CHARS}}}(?::[0-9]{{1,5}})?(?:[/?#][\s\S]*)?$",
    examples=["https://blog.example/posts/1"],
)
PAGEVIEW_BODY = obj(
    {
        "url": PAGE_URL,
        "time": {
            **BODY_TIME,
            "description": "when the page was viewed (the script's clock): with the URL and the visitor it makes "
            "the page view unique; at most a day old",
        },
    },
    {
        "referrer": nullable(string(maxLength=view_input.URL_MAX_CHARS)),
        "width": nullable(integer(0, BEACON_WIDTH_MAX)),
        "site": nullable(
            {**NAME, "maxLength": SITE_MAX_CHARS, "description": "the site counted (default: the URL's host)"}
        ),
        "event": nullable({**NAME, "description": "a custom event's name (absent: a page view)"}),
        "dimensions": nullable(EVENT["properties"]["dimensions"]),
        "values": nullable(EVENT["properties"]["values"]),
    },
    closed=True,
)
# Dimensions and values belong to custom events: given (not null), they need an event.
PAGEVIEW_BODY["dependentSchemas"] = {
    field: {
        "anyOf": [{"properties": {field: {"type": "null"}}}, {"required": ["event"], "properties": {"event": NAME}}]
    }
    for field in ("dimensions", "values")
}
PAGEVIEW_OUTCOME = obj(
    {"counted": BOOLEAN, "site": nullable(NAME)},
    {"reason": string(enum=["bot"], description="why nothing was counted")},
)
SITE_LISTING = listing("sites", obj({"site": NAME, "last_seen": ISO_TIME}))


def _ranked(label: str) -> Schema:
    return array(
        obj({label: string(), "pageviews": COUNT}), description="sorted by page views, most first, at most `limit`"
    )


GOAL_RESULT = obj(
    {
        "conversions": {**COUNT, "description": "the goal's events or page views in the window"},
        "visitors": {**COUNT, "description": "distinct converting visitors, over the visitors' hours"},
        "visitors_exact": BOOLEAN,
        "conversion_rate": {**RATE, "description": "converting visitors / the site's visitors (0 without visitors)"},
    }
)
SITE_SUMMARY = obj(
    {
        "site": NAME,
        **SPAN,
        "visitors": COUNT,
        "pageviews": COUNT,
        "bots": {**COUNT, "description": "page views in the window refused as a known bot's (each once)"},
        "pages": _ranked("path"),
        "referrers": _ranked("referrer"),
        "sources": _ranked("source"),
        "devices": _ranked("device"),
        "others": {
            "type": "object",
            "description": "per list, what it leaves out: how many values and their page views",
            "additionalProperties": obj({"values": COUNT, "pageviews": COUNT}),
        },
        "complete": BOOLEAN,
        "exact": BOOLEAN,
        "keys_read": COUNT,
        "goals": array(
            {"allOf": [ref("StoredGoal"), GOAL_RESULT]}, description="each goal of the site's settings, in their order"
        ),
    },
    {"visitors_exact": BOOLEAN, "visitors_start": ISO_TIME, "visitors_end": ISO_TIME},
)

SITE_ZONE = {**ZONE, "description": "an IANA time-zone name: the site's answers and Sites tab use it by default"}
GOAL_NAME = string(pattern=rf"^[^\x00-\x1f\x7f-\x9f]{{1,{GOAL_NAME_MAX_CHARS}}}$", examples=["Signup"])
GOAL_EVENT = {**NAME, "not": {"const": "pageview"}, "description": "a custom event's name, as tally(name) sends it"}
GOAL_PAGE = string(
    pattern="^/", maxLength=GOAL_PAGE_MAX_CHARS, description="a page path, as the summary's pages list it"
)
GOAL = {
    "oneOf": [obj({"name": GOAL_NAME, **goal}, closed=True) for goal in ({"event": GOAL_EVENT}, {"page": GOAL_PAGE})]
}
SITE_SETTINGS_BODY = obj(
    {}, {"timezone": nullable(SITE_ZONE), "goals": nullable(array(GOAL, maxItems=MAX_GOALS))}, closed=True
)
STORED_GOAL = obj(
    {
        "name": string(),
        "since": {**ISO_TIME, "description": "when the goal was first set: its visitors are counted from then"},
    },
    {"event": string(), "page": string()},
)
SITE_SETTINGS = obj(
    {"site": NAME, "timezone": SITE_ZONE, "goals": array(ref("StoredGoal")), "updated": nullable(ISO_TIME)}
)
SITE_REALTIME = obj(
    {
        "site": NAME,
        "time": ISO_TIME,
        "visitors": {**COUNT, "description": "distinct visitors of the last five minutes (this one included)"},
        "visitors_exact": {
            **BOOLEAN,
            "description": f"false past {sketches.EXACT_LIMIT} visitors: then a HyperLogLog estimate, as a summary's",
        },
        "visitors_start": ISO_TIME,
        "pageviews": array(
            obj({"start": ISO_TIME, "pageviews": COUNT}),
            description="page views per minute, the last 30 minutes, oldest first",
            minItems=30,
            maxItems=30,
        ),
        "pageviews_start": ISO_TIME,
    }
)

# Named once in components.schemas and referred to from operations.
COMPONENTS: dict[str, Schema] = {
    "Error": ERROR,
    "Event": EVENT,
    "View": VIEW,
    "AttributeValue": ATTRIBUTE_VALUE,
    "AttributeNumber": ATTRIBUTE_NUMBER,
    "StoredGoal": STORED_GOAL,
}
