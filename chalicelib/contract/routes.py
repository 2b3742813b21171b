"""Every route of the API, one `Operation` each: what it reads, what it answers, which errors. Pure. Adding a route is
one entry here; its key's scope comes from access.policy.ROUTES (docs/api.md, "The contract")."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from chalicelib.contract import schemas as s
from chalicelib.core import quarantine, timebuckets, window_params, zones
from chalicelib.counters import breakdowns
from chalicelib.dashboard import assets
from chalicelib.reports import api as reports_api
from chalicelib.views import api as views_api

JSON = "application/json"
# An operation's tag is its path's first segment, or the one named here.
TAGS = {
    "counters": "events",
    "hyperloglog": "uniques",
    "quarantine": "operations",
    "audit": "operations",
    "tally.js": "sites",
    "": "dashboard",
    "openapi.json": "dashboard",
}


@dataclass(frozen=True)
class Param:
    name: str
    schema: s.Schema
    description: str = ""
    where: str = "query"  # query, path or header
    required: bool = False


@dataclass(frozen=True)
class Answer:
    status: int
    description: str
    schema: s.Schema | None = None
    media: tuple[str, ...] = (JSON,)
    headers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Link:
    name: str
    operation_id: str
    parameters: dict[str, str]
    description: str = ""


@dataclass(frozen=True)
class Operation:
    route: str  # "METHOD /path"
    operation_id: str
    summary: str
    answers: tuple[Answer, ...]
    params: tuple[Param, ...] = ()
    body: s.Schema | None = None
    # Besides 400 for any input (parameters or a body), those of its key (401, 403) and of any route (414, 429, 503).
    errors: tuple[int, ...] = ()
    links: tuple[Link, ...] = ()
    description: str = ""
    tag: str = ""  # default: its path's (TAGS)

    @property
    def key(self) -> tuple[str, str]:
        method, path = self.route.split(" ")
        return method, path

    @property
    def tags(self) -> list[str]:
        first = self.key[1].split("/")[1]
        return [self.tag or TAGS.get(first, first)]


def path(name: str, schema: s.Schema, description: str = "") -> Param:
    return Param(name, schema, description, "path", True)


def listing(route: str, operation_id: str, summary: str, answer: str, schema: s.Schema, *params: Param) -> Operation:
    """A GET of one page of a listing: its parameters, then `limit` and `cursor`."""
    return Operation(route, operation_id, summary, (Answer(200, answer, schema),), (*params, *PAGE))


def beacon(route: str, operation_id: str, answer: Answer, body: s.Schema, params: tuple[Param, ...] = ()) -> Operation:
    summary = f"As POST {route}, from navigator.sendBeacon (an ingest-only key as `?key=`)"
    return Operation(f"POST /beacon{route}", operation_id, summary, (answer,), params, body)


WINDOW = Param("window", s.windowed(), "the window (`window` and `end`, or `start` and `end`), `tz`, `compare`")
PAGE = (Param("limit", s.LIMIT, "entries per page"), Param("cursor", s.CURSOR))
SITE = path("site", {**s.PATH_NAME, "maxLength": s.SITE_MAX_CHARS}, "the site: its hostname, or the script's data-site")


def histogram_window(resolutions: Iterable[str], default: str, aligned: int = 1) -> Param:
    """A histogram's window and resolution, each resolution with the longest window whose histogram
    stays within the bucket cap wherever it ends: read as whole `aligned`-minute units, a window that
    starts mid-bucket overlaps one bucket more, so at most (cap - 1) * the resolution's minutes +
    `aligned` minutes."""
    cap = window_params.MAX_HISTOGRAM_BUCKETS
    most = {
        r: min(window_params.MAX_WINDOW_MINUTES, (cap - 1) * zones.NOMINAL_MINUTES[r] + aligned) for r in resolutions
    }
    description = f"the window and the resolution: at most {cap} buckets, so a finer resolution takes a shorter window"
    return Param("window", s.windowed(most, default), description)


COUNTER = path("counter", s.PATH_NAME)
WHERE = Param("where", s.WHERE, "a filter: name:value, repeatable")
FILTERED = "`where=name:value` (repeatable, all must hold) counts only the events having those dimension values."
UNIQUE_NAME = path("name", s.PATH_NAME)
WINDOWED = (
    f"A window of W minutes ending at T counts the minute buckets floor(T/60000)-W+1 .. floor(T/60000); "
    f"`start` and `end` the buckets from floor(start) to floor(end). At most {window_params.MAX_WINDOW_DAYS} days."
)
LOCAL = (
    "`tz` puts buckets and calendar windows (`window=today`, `this_month`, ...) on a zone's clock, exact "
    "through daylight-saving changes; `compare` adds `previous`, the same answer over the period compared with."
)
HOUR_ALIGNED = "Windows are hour-aligned: the ceil(W/60) whole UTC hours up to and including the one holding `end`."
NOT_MODIFIED = Answer(304, "the client's copy is current (If-None-Match)")
IF_NONE_MATCH = Param("If-None-Match", s.string(), where="header")
MEDIA = {suffix: content_type.split(";")[0] for suffix, content_type in assets.CONTENT_TYPES.items()}

OPERATIONS: tuple[Operation, ...] = (
    # -- events and windowed counts
    Operation(
        "POST /events",
        "postEvents",
        "Send one event, or a batch of them",
        (Answer(201, "stored, each counted once however often it is sent", s.IDS),),
        body=s.EVENTS_BODY,
        links=(Link("countOfTheCounter", "getCounter", {"path.counter": "$request.body#/counter"}),),
        description="A bad event refuses the whole batch. 503 `PartialWrite` names the `stored` and `failed` ids.",
    ),
    beacon("/events", "postBeaconEvents", Answer(201, "stored", s.IDS), s.EVENTS_BODY),
    Operation(
        "POST /beacon/pageview",
        "postPageview",
        "A page view (or custom event) from tally.js, counted without cookies (docs/tracker.md)",
        (Answer(202, "counted, or not (a known bot: `counted` false)", s.PAGEVIEW_OUTCOME),),
        body=s.PAGEVIEW_BODY,
        tag="sites",
        description="The visitor id is a keyed hash of a daily salt, the site, the client's IP address and user "
        "agent, never stored. A resent beacon (same url, time and visitor) counts once.",
    ),
    Operation(
        "GET /counters/{counter}",
        "getCounter",
        "A counter's count over a window",
        (Answer(200, "the count and the sums of its values", s.compared(s.COUNT_ANSWER)),),
        params=(COUNTER, WINDOW, WHERE),
        description=f"{WINDOWED} {LOCAL} {FILTERED}",
    ),
    Operation(
        "GET /counters/{counter}/histogram",
        "getCounterHistogram",
        "A counter's counts per minute, hour, day, week or month",
        (Answer(200, "one bucket per period", s.compared(s.HISTOGRAM_ANSWER)),),
        params=(COUNTER, histogram_window(s.COUNTER_RESOLUTIONS, "hour"), WHERE),
        description=f"{WINDOWED} {LOCAL} At most {window_params.MAX_HISTOGRAM_BUCKETS} buckets (a local one "
        f"more per change of offset). Weeks start on Monday. {FILTERED}",
    ),
    Operation(
        "GET /counters/{counter}/breakdown",
        "getCounterBreakdown",
        "A counter's count and sums per value of one dimension, most frequent first",
        (Answer(200, "the values, and what the list leaves out", s.compared(s.BREAKDOWN_ANSWER)),),
        params=(
            COUNTER,
            Param("by", s.DIMENSION_NAME, "the dimension", required=True),
            WINDOW,
            Param("limit", s.integer(1, breakdowns.MAX_LIMIT, default=breakdowns.DEFAULT_LIMIT), "values listed"),
            WHERE,
        ),
        description=f"{WINDOWED} {FILTERED} The list's counts plus `others.count` are the window's count. "
        "Exact (`exact: true`) while every breakdown summary read holds all its values (up to about 1,000 "
        "distinct values in a window); beyond that the listed counts and sums are still exact and `bound` "
        "says how many events a value not listed can have.",
    ),
    listing(
        "GET /counters",
        "listCounters",
        "The counters that exist, by name",
        "a page; `next` is the cursor of the next one (null: the last)",
        s.COUNTER_LISTING,
    ),
    # -- exact view counts
    Operation(
        "POST /views",
        "postViews",
        "Send one view, or a batch of them: each (url, time, clientId) counts once",
        (Answer(202, "queued", s.ACCEPTED_VIEWS),),
        body=s.VIEWS_BODY,
        links=(Link("viewsOfTheUrl", "getViews", {"query.url": "$request.body#/url"}),),
    ),
    beacon("/views", "postBeaconViews", Answer(202, "queued", s.ACCEPTED_VIEWS), s.VIEWS_BODY),
    Operation(
        "GET /views",
        "getViews",
        "A URL's views: of all time, or over a window",
        (Answer(200, "the count (window fields only with a window)", s.compared(s.VIEW_COUNT_ANSWER)),),
        params=(
            Param("url", s.VIEW_URL_QUERY, required=True),
            WINDOW,
            Param("resolution", s.string(enum=list(views_api.SERIES_RESOLUTIONS)), "with a window: also `buckets`"),
        ),
        description=f"{WINDOWED} {LOCAL}",
    ),
    Operation(
        "GET /views/top",
        "getTopViews",
        "The most viewed URLs of a window, with their exact views",
        (Answer(200, "the top URLs, most viewed first", s.compared(s.TOP_VIEWS_ANSWER)),),
        params=(
            WINDOW,
            Param("limit", s.TOP_LIMIT, "URLs listed"),
            Param("prefix", s.TOP_PREFIX, "only URLs starting with it"),
        ),
        description=f"{HOUR_ALIGNED} {LOCAL} A calendar window counts from its local midnight. The ranking is "
        "exact whenever every hour, day or 32-day block in the window holds at most 1,000 distinct URLs; otherwise "
        "`exact` says whether it is, and `bound` what a URL left out can have.",
    ),
    listing("GET /views/urls", "listViewUrls", "The URLs with views, with their counts", "a page", s.URL_LISTING),
    # -- unique counts
    Operation(
        "POST /hyperloglog/{name}",
        "postUniqueItems",
        "Add items to a unique count",
        (Answer(202, "queued; the number of items", s.ACCEPTED_ITEMS),),
        params=(UNIQUE_NAME,),
        body=s.UNIQUE_ITEMS_BODY,
        links=(Link("countOfTheName", "getUniqueCount", {"path.name": "$request.path.name"}),),
    ),
    beacon(
        "/hyperloglog/{name}",
        "postBeaconUniqueItems",
        Answer(202, "queued", s.ACCEPTED_ITEMS),
        s.UNIQUE_ITEMS_BODY,
        (UNIQUE_NAME,),
    ),
    Operation(
        "GET /hyperloglog/{name}",
        "getUniqueCount",
        "Distinct items of a name: of all time, or over an hour-aligned window",
        (Answer(200, "the estimate; exact while small", s.compared(s.UNIQUE_COUNT_ANSWER)),),
        params=(UNIQUE_NAME, WINDOW),
        description=f"{HOUR_ALIGNED} {LOCAL} A calendar window counts from its local midnight.",
    ),
    Operation(
        "GET /hyperloglog/{name}/histogram",
        "getUniqueHistogram",
        "Distinct items per hour, day, week or month (not additive)",
        (Answer(200, "one bucket per period", s.compared(s.UNIQUE_HISTOGRAM_ANSWER)),),
        params=(UNIQUE_NAME, histogram_window(s.UNIQUE_RESOLUTIONS, "day", timebuckets.HOUR_MINUTES)),
        description=f"{HOUR_ALIGNED} {LOCAL} At most {window_params.MAX_HISTOGRAM_BUCKETS} buckets.",
    ),
    Operation(
        "GET /hyperloglog",
        "getUnionOrNames",
        "With `names`: distinct items of their union; without: the names that exist",
        (Answer(200, "the union's estimate, or a page of names", s.UNION_OR_NAMES),),
        params=(
            Param(
                "query",
                s.union_or_listing(),
                "`names` with an optional window (a union), or `limit` and `cursor` (a page of names)",
            ),
        ),
        description=HOUR_ALIGNED,
    ),
    # -- reports
    Operation(
        "POST /reports",
        "runReports",
        "Run the scheduled report now",
        (Answer(201, "reports written", s.REPORT_RUN), Answer(200, "nothing new to report", s.REPORT_RUN)),
        links=(Link("theFirstReport", "getReport", {"path.report_id": "$response.body#/reports/0/id"}),),
    ),
    listing("GET /reports", "listReports", "Reports, newest first", "the newest reports", s.REPORT_LISTING),
    Operation(
        "GET /reports/{report_id}",
        "getReport",
        "One report, as JSON or as a CSV download",
        (
            Answer(
                200,
                "the report; a CSV download (`counter,events,<attribute>...`) with format=csv or a .csv path",
                s.REPORT,
                media=(JSON, "text/csv"),
            ),
        ),
        params=(
            path("report_id", s.REPORT_PATH_ID),
            Param("format", s.query_text(enum=list(reports_api.FORMATS), default="json")),
        ),
        errors=(404,),
    ),
    # -- the quarantine
    listing(
        "GET /quarantine",
        "listQuarantine",
        "Records set aside by the background handlers",
        "the records",
        s.QUARANTINE_RECORDS,
        Param("source", s.query_text(enum=list(quarantine.SOURCES)), "default: every source"),
    ),
    Operation(
        "GET /quarantine/counts",
        "countQuarantine",
        "How many records each source set aside",
        (Answer(200, "a count per source", s.QUARANTINE_COUNTS),),
    ),
    Operation(
        "POST /quarantine/replay",
        "replayQuarantine",
        "Count set-aside stream records once, after the fault that set them aside is fixed",
        (Answer(200, "what each record came to", s.REPLAY),),
        body=s.REPLAY_BODY,
    ),
    # -- the audit
    listing(
        "GET /audit",
        "listAudit",
        "Events partitions whose stored events and counted events do not add up",
        "the open findings, oldest partition first",
        s.AUDIT_LISTING,
    ),
    Operation(
        "POST /audit",
        "runAudit",
        "Run the scheduled audit now",
        (Answer(200, "what the run compared and found", s.AUDIT_RUN),),
    ),
    Operation(
        "POST /audit/repair",
        "repairPartition",
        "Recount the buckets a short partition's events fall in",
        (Answer(200, "what the repair read and wrote", s.REPAIR),),
        body=s.REPAIR_BODY,
    ),
    # -- keys
    Operation(
        "POST /keys",
        "createKey",
        "Create a key: the only answer that shows it",
        (Answer(201, "the new key and its record", s.NEW_KEY),),
        body=s.NEW_KEY_BODY,
        links=(
            Link(
                "useTheKey",
                "listCounters",
                {"header.Authorization": "Bearer {$response.body#/key}"},
                "call the API with the new key",
            ),
            Link("revokeTheKey", "revokeKey", {"path.key_id": "$response.body#/id"}),
        ),
    ),
    listing("GET /keys", "listKeys", "Every key's record (never a key)", "the records", s.KEY_LISTING),
    Operation(
        "DELETE /keys/{key_id}",
        "revokeKey",
        "Revoke a key (idempotent)",
        (Answer(200, "the record, now revoked", s.KEY_RECORD),),
        params=(path("key_id", s.KEY_ID),),
        errors=(404,),
    ),
    # -- the dashboard and this document: no key
    Operation(
        "GET /",
        "dashboard",
        "The dashboard, one HTML page",
        (Answer(200, "the page", s.string(), media=(MEDIA[".html"],), headers=("ETag",)),),
    ),
    Operation(
        "GET /dashboard/{name}",
        "dashboardAsset",
        "A file of the dashboard: immutable with the current `v`, else revalidated by ETag",
        (Answer(200, "the file", s.string(), media=tuple(MEDIA.values()), headers=("ETag",)), NOT_MODIFIED),
        params=(
            path("name", s.string(minLength=1, examples=["dashboard.js"])),
            Param("v", s.query_text(), "the content hash the page names"),
            IF_NONE_MATCH,
        ),
        errors=(404,),
    ),
    listing("GET /sites", "listSites", "The sites that sent page views, by name", "a page of sites", s.SITE_LISTING),
    Operation(
        "GET /sites/{site}/summary",
        "getSiteSummary",
        "A site's visitors, page views, top pages, referrers, sources and devices over a window",
        (Answer(200, "the summary", s.compared(s.SITE_SUMMARY)),),
        params=(SITE, WINDOW, Param("limit", s.integer(1, 1000, default=10), "the longest list")),
        description=f"{WINDOWED} {LOCAL}"
        + " Visitors are counted over the quarter hours holding the window (`visitors_start`, `visitors_end`).",
    ),
    Operation(
        "GET /sites/{site}",
        "getSiteSettings",
        "A site's settings: its time zone and goals (the defaults when none were set)",
        (Answer(200, "the settings", s.SITE_SETTINGS),),
        params=(SITE,),
    ),
    Operation(
        "PUT /sites/{site}",
        "putSiteSettings",
        "Replace a site's settings: its time zone and goals (a field left out takes its default)",
        (Answer(200, "the settings stored", s.SITE_SETTINGS),),
        params=(SITE,),
        body=s.SITE_SETTINGS_BODY,
        description='A goal is a custom event (`{"name", "event"}`) or a page path (`{"name", "page"}`); '
        "its visitors are counted from when it was first set (`since`). The beacon reads a site's settings at most "
        'once a minute per process: a change reaches every page view within that (docs/tracker.md, "Goals").',
    ),
    Operation(
        "GET /sites/{site}/realtime",
        "getSiteRealtime",
        "A site right now: the visitors of the last five minutes and page views per minute of the last 30",
        (Answer(200, "the site now", s.SITE_REALTIME),),
        params=(SITE,),
        description="Visitors come from minute sketches the unique-count handler merges, so they show within the "
        "unique-count queue's batching window; page views come through the events stream (docs/tracker.md, "
        '"Right now").',
    ),
    Operation(
        "GET /tally.js",
        "trackerScript",
        "The tracker script a site links (docs/tracker.md): cached an hour, or a year with the current `v`",
        (Answer(200, "the script", s.string(), media=(MEDIA[".js"],), headers=("ETag",)), NOT_MODIFIED),
        params=(Param("v", s.query_text(), "the script's content hash"), IF_NONE_MATCH),
    ),
    Operation("GET /openapi.json", "openapi", "This document", (Answer(200, "the OpenAPI document", s.OPENAPI),)),
)
