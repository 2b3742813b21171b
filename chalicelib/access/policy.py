"""Who may do what: scopes, key records, the route table (ROUTES) and the access decisions, the
authorizer's (`gateway_decision`) and the route-level one (`request_decision`), from the same functions.
Pure. docs/access.md, "How it is enforced"; docs/guarantees.md, "The authorizer's cached policy"."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chalicelib.access import tracker
from chalicelib.core import inputs, times, validation
from chalicelib.core.errors import ValidationError

INGEST, READ, ADMIN, TRACKER = "ingest", "read", "admin", "tracker"
SCOPES = (INGEST, READ, ADMIN, TRACKER)
# What each scope allows (docs/access.md, "Keys"); a tracker key only routes that say so (RouteAccess.tracker).
IMPLIED = {INGEST: {INGEST}, READ: {READ}, ADMIN: {INGEST, READ, ADMIN}, TRACKER: {TRACKER}}
# The authorizer (app.py) that guards a route tells the scope it needs.
AUTHORIZER_SCOPES = {"ingest_key": INGEST, "read_key": READ, "admin_key": ADMIN}

PREFIX_MAX_CHARS = 1024
NOTE_MAX_CHARS = 200
MAX_ORIGINS = 20
ORIGIN_PATTERN = re.compile(r"https?://[A-Za-z0-9.-]{1,253}(:[0-9]{1,5})?")
# Any text without control characters (C0, DEL, C1): a rule that does not move with the Unicode
# version (str.isprintable's does), so the OpenAPI document can state it.
PREFIX_PATTERN = re.compile(rf"[^\x00-\x1f\x7f-\x9f]{{1,{PREFIX_MAX_CHARS}}}")
NEW_KEY_FIELDS = {"scopes", "prefix", "origins", "sites", "note", "rate_per_second"}
# Requests a second one key may make: its own, else its scopes' largest default (docs/access.md, "Limits per key").
RATE_MIN, RATE_MAX = 1, 500
DEFAULT_RATES = {TRACKER: 20, INGEST: 100, READ: 100, ADMIN: 100}


@dataclass(frozen=True)
class KeyRecord:
    """A stored key, without its secret."""

    id: str
    scopes: frozenset[str]
    prefix: str | None = None
    origins: tuple[str, ...] = ()
    note: str = ""
    created_ms: int = 0
    revoked_ms: int | None = None
    sites: tuple[str, ...] = ()
    rate_per_second: int = RATE_MIN

    @property
    def is_tracker(self) -> bool:
        return TRACKER in self.scopes

    def may(self, scope: str) -> bool:
        return any(scope in IMPLIED.get(held, ()) for held in self.scopes)

    def as_dict(self) -> dict[str, Any]:
        """What GET /keys shows: never the key, nor its hash."""
        return {
            "id": self.id,
            "scopes": sorted(self.scopes),
            "prefix": self.prefix,
            "origins": list(self.origins),
            "sites": list(self.sites),
            "rate_per_second": self.rate_per_second,
            "note": self.note,
            "created": times.iso(self.created_ms),
            "revoked": None if self.revoked_ms is None else times.iso(self.revoked_ms),
        }


@dataclass(frozen=True)
class Decision:
    allowed: bool
    # 200, or 400 (a tracker's beacon it cannot read) / 401 (no usable key) / 403 (a key that may not do this)
    status: int
    reason: str


ALLOWED = Decision(True, 200, "allowed")


def gateway_decision(record: KeyRecord | None, need: str) -> Decision:
    """What the authorizer can tell from the key alone."""
    if record is None:
        return Decision(False, 401, "a valid key is needed: send Authorization: Bearer <key>")
    if record.revoked_ms is not None:
        return Decision(False, 401, "this key was revoked")
    if record.is_tracker and need != TRACKER:
        return Decision(False, 403, "a tracker key only counts page views of its sites: POST /beacon/pageview")
    if not record.may(need):
        return Decision(False, 403, f"this key does not have the {need} scope")
    return ALLOWED


def request_decision(
    record: KeyRecord | None,
    need: str,
    names: Sequence[str] | None,
    origin: str | None,
    key_in_url: bool = False,
    tracker_route: bool = False,
) -> Decision:
    """The full decision, for the `names` the request touches (None: every name, or unclear). A tracker
    key passes here on a `tracker_route`: its page view is checked next (access/tracker.py)."""
    decision = gateway_decision(record, TRACKER if tracker_route and record is not None and record.is_tracker else need)
    if not decision.allowed or record is None:
        return decision
    if key_in_url and record.scopes not in ({INGEST}, {TRACKER}):
        return Decision(False, 403, "only a key with just the ingest scope, or a tracker key, may be sent as ?key=")
    if record.prefix is not None:
        limited = f"this key is limited to names starting with {record.prefix!r}"
        if names is None:
            return Decision(False, 403, limited)
        outside = [name for name in names if not name.startswith(record.prefix)]
        if outside:
            return Decision(False, 403, f"{limited}: {outside[0][:200]!r} is not")
    if record.origins and origin not in record.origins:
        return Decision(False, 403, "this key only works from the origins " + ", ".join(record.origins))
    return ALLOWED


def to_context(record: KeyRecord) -> dict[str, str]:
    """The record as the authorizer's context, which API Gateway passes on as flat strings only."""
    return {
        "key_id": record.id,
        "scopes": " ".join(sorted(record.scopes)),
        "prefix": record.prefix or "",
        "origins": " ".join(record.origins),
        "sites": " ".join(record.sites),
        "rate_per_second": str(record.rate_per_second),
    }


def from_context(context: Mapping[str, Any] | None) -> KeyRecord | None:
    if not context or not context.get("key_id"):
        return None
    return KeyRecord(
        id=context["key_id"],
        scopes=frozenset(context["scopes"].split()),
        prefix=context["prefix"] or None,
        origins=tuple(context["origins"].split()),
        sites=tuple(context["sites"].split()),
        rate_per_second=int(context["rate_per_second"]),
    )


@dataclass(frozen=True)
class NewKey:
    scopes: frozenset[str]
    prefix: str | None = None
    origins: tuple[str, ...] = ()
    note: str = ""
    sites: tuple[str, ...] = ()
    rate_per_second: int = RATE_MIN


def parse_new_key(body: Any) -> NewKey:
    """`{"scopes": [...], "prefix"?, "origins"?, "sites"?, "note"?, "rate_per_second"?}`, validated."""
    if not isinstance(body, dict):
        raise ValidationError(
            'the body must be a JSON object: {"scopes": [...], "prefix"?, "origins"?, "sites"?, "note"?, '
            '"rate_per_second"?}'
        )
    validation.known_fields(body, NEW_KEY_FIELDS)
    scopes = body.get("scopes")
    if not isinstance(scopes, list) or not scopes or not all(isinstance(s, str) and s in SCOPES for s in scopes):
        raise ValidationError(f"scopes must be a non-empty list of {', '.join(SCOPES)}")
    prefix = body.get("prefix")
    if prefix is not None:
        says = "{span} characters, none a control character"
        validation.text(prefix, "prefix", PREFIX_MAX_CHARS, pattern=PREFIX_PATTERN, says=says)
    origins = body.get("origins", [])
    if not isinstance(origins, list) or len(origins) > MAX_ORIGINS:
        raise ValidationError(f"origins must be a list of at most {MAX_ORIGINS} origins")
    if not all(isinstance(origin, str) and ORIGIN_PATTERN.fullmatch(origin) for origin in origins):
        raise ValidationError("each origin must look like https://example.com or http://localhost:8000")
    if origins and set(scopes) != {INGEST}:
        raise ValidationError('origins limit ingest keys only: give scopes ["ingest"]')
    note = validation.text(body.get("note", ""), "note", NOTE_MAX_CHARS, empty=True, says="text of {span} characters")
    sites = tracker_sites(set(scopes), prefix, body.get("sites"))
    given = body.get("rate_per_second")
    rate = max(DEFAULT_RATES[scope] for scope in scopes) if given is None else validation.whole(given)
    if rate is None or not RATE_MIN <= rate <= RATE_MAX:
        raise ValidationError(f"rate_per_second must be a whole number from {RATE_MIN} to {RATE_MAX}")
    return NewKey(frozenset(scopes), prefix, tuple(dict.fromkeys(origins)), note, sites, rate)


def tracker_sites(scopes: set[str], prefix: str | None, sites: Any) -> tuple[str, ...]:
    """A tracker key's sites (access/tracker.py says how they match); none for any other key."""
    if TRACKER not in scopes:
        if sites is not None:
            raise ValidationError('sites limit tracker keys only: give scopes ["tracker"]')
        return ()
    if scopes != {TRACKER}:
        raise ValidationError("a tracker key has the tracker scope alone: it is published in pages")
    if prefix is not None:
        raise ValidationError("a tracker key has no prefix: the server names what it counts")
    return tracker.parse_sites(sites)


@dataclass(frozen=True)
class Names:
    """Where a route's names are: a path or query parameter (a list when `sep`), or a body field (of
    one object, or of each under `batch`). `every`: the route covers every name (reports, quarantine,
    key management); `listing_without_query`: without its query parameter, it lists every name."""

    path: str | None = None
    query: str | None = None
    sep: str | None = None
    body: str | None = None
    batch: str | None = None
    every: bool = False
    listing_without_query: bool = False

    def extract(
        self, path_params: Mapping[str, str], query: Mapping[str, str], body: str | bytes | None
    ) -> tuple[str, ...] | None:
        """The names, or None when the route covers every name or the request is unclear."""
        if self.every:
            return None
        if self.path is not None:
            value = path_params.get(self.path)
            return None if value is None else (value,)
        if self.query is not None:
            raw = query.get(self.query)
            if raw is None:
                return None if self.listing_without_query else ()
            return tuple(part.strip() for part in raw.split(self.sep)) if self.sep else (raw,)
        if self.body is not None:
            return _body_names(body, self.body, self.batch)
        return None


def _body_names(raw: str | bytes | None, name_field: str, batch: str | None) -> tuple[str, ...] | None:
    """Every value of `name_field` in one object or in each under `batch`; None for another shape."""
    try:
        body = inputs.json_body(raw)  # the app's own bounded parser: sizes and depth checked first
    except ValidationError:
        return None
    if not isinstance(body, dict):
        return None
    items = body.get(batch) if batch is not None and batch in body else [body]
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        return None
    values = [item.get(name_field) for item in items]
    return tuple(values) if all(isinstance(v, str) for v in values) else None


EVERY_NAME = Names(every=True)


@dataclass(frozen=True)
class RouteAccess:
    """One route's access decision: the scope it needs (None: public), the names it touches,
    and whether it is a beacon route (key as `?key=`, ingest-only, checked by the app)."""

    scope: str | None
    names: Names = field(default=EVERY_NAME)
    beacon: bool = False
    tracker: bool = False  # a tracker key may send it (its page views are checked: access/tracker.py)


# Every route's decision by (method, route path as app.py declares it): docs/access.md, "Which route needs which scope".
ROUTES: dict[tuple[str, str], RouteAccess] = {
    ("POST", "/events"): RouteAccess(INGEST, Names(body="counter", batch="events")),
    ("POST", "/views"): RouteAccess(INGEST, Names(body="url", batch="views")),
    ("POST", "/hyperloglog/{name}"): RouteAccess(INGEST, Names(path="name")),
    # For `navigator.sendBeacon` (docs/access.md, "Browsers"): no gateway authorizer, the key as `?key=`.
    ("POST", "/beacon/events"): RouteAccess(INGEST, Names(body="counter", batch="events"), beacon=True),
    ("POST", "/beacon/views"): RouteAccess(INGEST, Names(body="url", batch="views"), beacon=True),
    ("POST", "/beacon/hyperloglog/{name}"): RouteAccess(INGEST, Names(path="name"), beacon=True),
    # The tracker's page views: the server names what it counts (docs/access.md, "Tracker keys").
    ("POST", "/beacon/pageview"): RouteAccess(INGEST, EVERY_NAME, beacon=True, tracker=True),
    ("GET", "/counters/{counter}"): RouteAccess(READ, Names(path="counter")),
    ("GET", "/counters/{counter}/histogram"): RouteAccess(READ, Names(path="counter")),
    ("GET", "/counters/{counter}/breakdown"): RouteAccess(READ, Names(path="counter")),
    ("GET", "/hyperloglog/{name}"): RouteAccess(READ, Names(path="name")),
    ("GET", "/hyperloglog/{name}/histogram"): RouteAccess(READ, Names(path="name")),
    # Without `names` it lists every name: not for a prefix-limited key.
    ("GET", "/hyperloglog"): RouteAccess(READ, Names(query="names", sep=",", listing_without_query=True)),
    ("GET", "/views"): RouteAccess(READ, Names(query="url")),
    # Its `prefix` is a URL prefix: a prefix-limited key may ask for one inside its own.
    ("GET", "/views/top"): RouteAccess(READ, Names(query="prefix", listing_without_query=True)),
    ("GET", "/reports"): RouteAccess(READ),
    ("GET", "/reports/{report_id}"): RouteAccess(READ),
    ("POST", "/reports"): RouteAccess(ADMIN),
    ("GET", "/quarantine"): RouteAccess(ADMIN),
    ("POST", "/keys"): RouteAccess(ADMIN),
    ("GET", "/keys"): RouteAccess(ADMIN),
    ("DELETE", "/keys/{key_id}"): RouteAccess(ADMIN),
    # The dashboard's static page and its files, and the API's contract: anyone. Its listings cover every name.
    ("GET", "/"): RouteAccess(None),
    ("GET", "/dashboard/{name}"): RouteAccess(None),
    ("GET", "/openapi.json"): RouteAccess(None),
    ("GET", "/tally.js"): RouteAccess(None),  # the tracker script, loaded by any site's page
    ("GET", "/counters"): RouteAccess(READ),
    ("GET", "/views/urls"): RouteAccess(READ),
    ("GET", "/sites"): RouteAccess(READ),
    # A site's routes read names the path does not spell (site:<site>, site-utm:<site>, goal:<site>:<id>).
    ("GET", "/sites/{site}/summary"): RouteAccess(READ),
    ("GET", "/sites/{site}/realtime"): RouteAccess(READ),
    ("GET", "/sites/{site}"): RouteAccess(ADMIN),
    ("PUT", "/sites/{site}"): RouteAccess(ADMIN),
    ("GET", "/quarantine/counts"): RouteAccess(ADMIN),
    ("POST", "/quarantine/replay"): RouteAccess(ADMIN),
    ("GET", "/audit"): RouteAccess(ADMIN),
    ("POST", "/audit"): RouteAccess(ADMIN),
    ("POST", "/audit/repair"): RouteAccess(ADMIN),
}


def route_access(method: str, route: str, authorizer_name: str | None) -> RouteAccess:
    """What the route-level check enforces: the scope of the authorizer API Gateway ran (or the beacon
    routes' own), and the names from ROUTES (a route missing there touches every name)."""
    decided = ROUTES.get((method, route))
    if decided is not None and decided.beacon:
        return decided
    if authorizer_name is None:
        return RouteAccess(None)
    return RouteAccess(AUTHORIZER_SCOPES[authorizer_name], decided.names if decided else EVERY_NAME)


def cors_origin(
    origin: str | None, stage_origins: Sequence[str], scope: str | None, record: KeyRecord | None
) -> str | None:
    """The Access-Control-Allow-Origin to answer, or None (docs/access.md, "Browsers")."""
    by_stage = "*" in stage_origins or origin in stage_origins
    by_key = scope == INGEST and (record is None or not record.origins or origin in record.origins)
    return origin if origin is not None and (by_stage or by_key) else None
