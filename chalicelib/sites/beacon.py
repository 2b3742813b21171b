"""`POST /beacon/pageview`: one page view (or custom event) from the tracker script, counted through Tally's own
paths: docs/tracker.md, "How a page view is counted" and "What is stored"."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from chalicelib.core import catalog, times, validation
from chalicelib.core.aws import SQS, DynamoDB
from chalicelib.core.errors import ValidationError
from chalicelib.core.settings import Settings
from chalicelib.events import ingest as events
from chalicelib.sites import names, privacy, salts
from chalicelib.sites import settings as site_settings
from chalicelib.sites.settings import Goal
from chalicelib.uniques import api as uniques_api
from chalicelib.views import api as views_api
from chalicelib.views import validation as view_input

FIELDS = {"url", "referrer", "width", "time", "site", "event", "dimensions", "values"}
MAX_WIDTH = 100_000
# A beacon's time picks its UTC day's salt, kept a day more (docs/tracker.md, "How a page view is counted").
MAX_AGE_MS = times.DAY_MS
_recent = catalog.Recent()


@dataclass(frozen=True)
class Beacon:
    url: str
    referrer: str | None
    width: int | None
    time_ms: int
    site: str | None
    event: str
    dimensions: Any = None
    values: Any = None


BOT = {"counted": False, "site": None, "reason": "bot"}  # the answer to a known bot's beacon


def parse_body(body: Any, now_ms: int, settings: Settings) -> Beacon:
    """`{"url", "time", "referrer"?, "width"?, "site"?, "event"?, "dimensions"?, "values"?}`."""
    if not isinstance(body, dict):
        raise ValidationError('the body must be a JSON object: {"url", "time", "referrer"?, "width"?, "site"?}')
    validation.known_fields(body, FIELDS)
    url = view_input.text(body.get("url"), "url", view_input.URL_MAX_CHARS)
    referrer = body.get("referrer")
    if referrer is not None:
        validation.text(referrer, "referrer", view_input.URL_MAX_CHARS, empty=True)
    width = None if body.get("width") is None else validation.integer(body["width"], "width", 0, MAX_WIDTH)
    if "time" not in body:
        raise ValidationError("time is required: with the url and the visitor it makes a page view unique")
    time_ms = times.parse(body["time"], "time")
    if time_ms < now_ms - MAX_AGE_MS:
        raise ValidationError("time is more than a day old: a page view is counted within a day")
    times.not_ahead(time_ms, now_ms, settings.max_future_skew_seconds)
    site = None if body.get("site") is None else names.site_name(body["site"], "site")
    event = names.PAGEVIEW if body.get("event") is None else validation.name(body["event"], "event")
    if event == names.PAGEVIEW and (body.get("dimensions") is not None or body.get("values") is not None):
        raise ValidationError("dimensions and values belong to custom events: give event too")
    return Beacon(url, referrer or None, width, time_ms, site, event, body.get("dimensions"), body.get("values"))


def count(
    dynamodb: DynamoDB,
    sqs: SQS,
    settings: Settings,
    item_key: bytes,
    beacon: Beacon,
    ip: str,
    user_agent: str | None,
    now_ms: int,
) -> dict[str, Any]:
    """Count one beacon (for a known bot, only that the site refused one: docs/tracker.md, "Bots");
    ValidationError for a URL that is not a page's."""
    bot = privacy.is_bot(user_agent)
    try:
        page = _page(beacon)
        site = beacon.site or names.site_name(page.host, "url's host")
    except ValidationError:
        if bot:
            return dict(BOT)  # its URL names no site: it counts nowhere
        raise
    salt = salts.salt_for_day(dynamodb, settings, item_key, beacon.time_ms // times.DAY_MS, now_ms)
    visitor = privacy.visitor_id(salt, site, ip, user_agent or "")
    view_url = privacy.page_url(beacon.url)
    if bot:
        event_id = _derived("bot", beacon.event, view_url, str(beacon.time_ms), visitor)
        bot_event = _event(names.bots_counter(site), event_id, beacon, None)
        events.store(dynamodb, settings, events.parse_body(bot_event, now_ms, settings), now_ms)
        return dict(BOT)
    if beacon.event != names.PAGEVIEW:
        counter = validation.name(names.event_counter(site, beacon.event), "event (with the site, at most 200)")
        event_id = _derived("event", beacon.event, view_url, str(beacon.time_ms), visitor)
        body = {**_event(counter, event_id, beacon, beacon.dimensions), "values": beacon.values}
        stored = events.parse_body(body, now_ms, settings)
        matched = site_settings.cached(dynamodb, settings, site, now_ms).goals_of_event(beacon.event)
    else:
        # Checked first: a refused event must leave nothing queued.
        stored = events.parse_body({"events": pageview_events(site, page, beacon, view_url, visitor)}, now_ms, settings)
        view = view_input.View(view_url, beacon.time_ms, _derived("view", view_url, str(beacon.time_ms), visitor))
        views_api.enqueue(sqs, settings, [view], now_ms)
        visitors = uniques_api.Post([visitor], beacon.time_ms)
        uniques_api.enqueue(sqs, settings, item_key, names.visitors_name(site), visitors, minute=True)  # realtime
        matched = site_settings.cached(dynamodb, settings, site, now_ms).goals_of_page(page.path)
    enqueue_goal_visitor(sqs, settings, item_key, site, matched, visitor, beacon.time_ms)
    events.store(dynamodb, settings, stored, now_ms)
    # The site in the catalog of sites: one write per site and hour per process.
    expires = now_ms // 1000 + names.RETENTION_SECONDS + times.DAY_MS // 1000
    catalog.touch(dynamodb, settings, names.CATALOG_KIND, _recent, {site: expires}, now_ms)
    return {"counted": True, "site": site}


def _page(beacon: Beacon) -> privacy.Page:
    try:
        return privacy.page(beacon.url, beacon.referrer)
    except ValueError as exc:
        raise ValidationError("url must be an http(s) URL with a host") from exc


def pageview_events(site: str, page: privacy.Page, beacon: Beacon, view_url: str, visitor: str) -> list[dict[str, Any]]:
    """The events one page view is counted as (at most 4 dimensions an event: two counters)."""
    device = privacy.device(beacon.width)
    event_id = _derived("pageview", view_url, str(beacon.time_ms), visitor)
    dimensions = {"page": page.path, "referrer": page.referrer, "source": page.utm_source, "device": device}
    found = [_event(names.pageview_counter(site), event_id, beacon, dimensions)]
    if page.has_utm:
        utm = {"source": page.utm_source, "medium": page.utm_medium, "campaign": page.utm_campaign}
        found.append(_event(names.utm_counter(site), event_id, beacon, utm))
    return found


def enqueue_goal_visitor(
    sqs: SQS, settings: Settings, item_key: bytes, site: str, goals: list[Goal], visitor: str, time_ms: int
) -> None:
    """The visitor into each matched goal's unique count, `goal:<site>:<id>` (docs/tracker.md, "Goals")."""
    for goal in goals:
        name = names.goal_visitors_name(site, goal.id)
        uniques_api.enqueue(sqs, settings, item_key, name, uniques_api.Post([visitor], time_ms))


def _event(counter: str, event_id: str, beacon: Beacon, dimensions: Any) -> dict[str, Any]:
    return {
        "counter": counter,
        "id": event_id,
        "time": beacon.time_ms,
        "retention": names.RETENTION_SECONDS,
        "dimensions": dimensions,
    }


def _derived(*parts: str) -> str:
    """An id made from the parts, 128 bits in hex: it names one page view and tells nothing of the visitor."""
    return hashlib.sha256(privacy.framed(*parts)).hexdigest()[:32]
