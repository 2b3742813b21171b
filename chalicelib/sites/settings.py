"""`PUT /sites/{site}` and `GET /sites/{site}`: a site's settings (its time zone and its goals), one
item in the counts table (sites.names.settings_key), and the beacon's per-process cache of them. Every
limit of the settings is here. How goals are counted and how stale the cache may be: docs/tracker.md, "Goals"."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from chalicelib.core import attributes, dynamo, times, validation, zones
from chalicelib.core.aws import DynamoDB
from chalicelib.core.client_cache import ClientCache
from chalicelib.core.errors import ValidationError
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import translated
from chalicelib.sites import names, privacy

MAX_GOALS = 20
GOAL_NAME_MAX_CHARS = 60
# Any text without control characters (C0, DEL, C1), as a key's prefix: a rule the OpenAPI document can state.
GOAL_NAME_PATTERN = re.compile(rf"[^\x00-\x1f\x7f-\x9f]{{1,{GOAL_NAME_MAX_CHARS}}}")
GOAL_PAGE_MAX_CHARS = privacy.DIMENSION_MAX_CHARS  # a page goal matches the `page` dimension as stored
FIELDS = {"timezone", "goals"}
# The beacon reads a site's settings at most once per site and process in this time (docs/tracker.md, "Goals").
CACHE_SECONDS = 60
CACHE_MAX_SITES = 1000
GOAL_ID_HEX = 14  # so that goal:<site>:<id> is a name (sites.names.goal_visitors_name)


@dataclass(frozen=True)
class Goal:
    """A custom event (`event`) or a page path (`page`) whose visitors convert; `since` is when it
    was first set (its visitors are counted from then)."""

    name: str
    event: str | None = None
    page: str | None = None
    since_ms: int = 0

    @property
    def id(self) -> str:
        """The goal's target as 14 hex characters: the same goal keeps its visitors when renamed."""
        target = f"event\n{self.event}" if self.event is not None else f"page\n{self.page}"
        return hashlib.sha256(target.encode("utf-8")).hexdigest()[:GOAL_ID_HEX]

    def as_dict(self) -> dict[str, Any]:
        target = {"event": self.event} if self.event is not None else {"page": self.page}
        return {"name": self.name, **target, "since": times.iso(self.since_ms)}


@dataclass(frozen=True)
class SiteSettings:
    site: str
    timezone: str = zones.DEFAULT_ZONE
    goals: tuple[Goal, ...] = field(default=())
    updated_ms: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "site": self.site,
            "timezone": self.timezone,
            "goals": [goal.as_dict() for goal in self.goals],
            "updated": None if self.updated_ms is None else times.iso(self.updated_ms),
        }

    # Goals sharing a target count the same visitors: the last of them stands for all.
    def goals_of_page(self, path: str) -> list[Goal]:
        return [goal for goal in self.goals if goal.page == path][-1:]

    def goals_of_event(self, event: str) -> list[Goal]:
        return [goal for goal in self.goals if goal.event == event][-1:]


def parse_zone(value: Any) -> str:
    """An IANA time-zone name `tz` takes (core.zones), as given."""
    if not isinstance(value, str):
        raise ValidationError("timezone must be an IANA time-zone name such as Europe/Berlin")
    try:
        zones.parse(value)
    except ValidationError as exc:
        raise ValidationError(f"timezone: {exc}") from exc
    return value


def parse_body(site: str, body: Any, old: SiteSettings, now_ms: int) -> SiteSettings:
    """`{"timezone"?: IANA name, "goals"?: [{"name", "event"} | {"name", "page"}]}`: the whole
    settings (a field left out takes its default); a goal already set keeps its `since`."""
    if not isinstance(body, dict) or not set(body) <= FIELDS:
        raise ValidationError('the body must be a JSON object: {"timezone"?, "goals"?}')
    zone = zones.DEFAULT_ZONE if body.get("timezone") is None else parse_zone(body["timezone"])
    raw = body.get("goals") or []
    if not isinstance(raw, list) or len(raw) > MAX_GOALS:
        raise ValidationError(f"goals must be a list of at most {MAX_GOALS} goals")
    since = {goal.id: goal.since_ms for goal in old.goals}
    goals = [_goal(entry, f"goals[{index}]") for index, entry in enumerate(raw)]
    return SiteSettings(site, zone, tuple(replace(g, since_ms=since.get(g.id, now_ms)) for g in goals), now_ms)


def _goal(entry: Any, where: str) -> Goal:
    """One goal. Two goals may share a target (they count the same) or a name (the owner's call)."""
    if not isinstance(entry, dict) or set(entry) not in ({"name", "event"}, {"name", "page"}):
        raise ValidationError(f'{where} must be {{"name", "event"}} or {{"name", "page"}}')
    says = "{span} characters, no control characters"
    name = validation.text(entry["name"], f"{where}.name", GOAL_NAME_MAX_CHARS, pattern=GOAL_NAME_PATTERN, says=says)
    if "event" in entry:
        event = validation.name(entry["event"], f"{where}.event")
        if event == names.PAGEVIEW:
            raise ValidationError(f"{where}.event: a page view is not a custom event; give page instead")
        return Goal(name, event=event)
    page = entry["page"]
    if not isinstance(page, str) or not page.startswith("/") or len(page) > GOAL_PAGE_MAX_CHARS:
        raise ValidationError(
            f"{where}.page must be a path starting with / of at most {GOAL_PAGE_MAX_CHARS} characters"
        )
    return Goal(name, page=page)


def read(dynamodb: DynamoDB, settings: Settings, site: str) -> SiteSettings:
    """The site's settings, or the defaults when none were set."""
    item = dynamo.get_item(
        dynamodb, settings.counts_table, names.settings_key(site), "could not read the site's settings"
    )
    if item is None:
        return SiteSettings(site)
    goals = tuple(
        Goal(g["name"], g.get("event"), g.get("page"), int(g["since"]))
        for g in json.loads(attributes.text(item, "goals"))
    )
    return SiteSettings(site, attributes.text(item, "timezone"), goals, attributes.integer(item, "updated_at"))


def write(dynamodb: DynamoDB, settings: Settings, new: SiteSettings) -> None:
    """Replace the site's settings (the last writer wins)."""
    item = {
        **names.settings_key(new.site),
        "timezone": {"S": new.timezone},
        "goals": {"S": json.dumps([{**g.as_dict(), "since": g.since_ms} for g in new.goals])},
        "updated_at": {"N": str(new.updated_ms or 0)},
    }
    with translated("could not store the site's settings"):
        dynamodb.put_item(TableName=settings.counts_table, Item=item)
    _cache.forget(dynamodb, new.site)


def get(dynamodb: DynamoDB, settings: Settings, site: str) -> SiteSettings:
    return read(dynamodb, settings, names.site_name(site))


def put(dynamodb: DynamoDB, settings: Settings, site: str, body: Any, now_ms: int) -> SiteSettings:
    """Validate the body against the stored settings, then store it (nothing changes on a 400)."""
    site = names.site_name(site)
    new = parse_body(site, body, read(dynamodb, settings, site), now_ms)
    write(dynamodb, settings, new)
    return new


class _Cache(ClientCache[str, SiteSettings]):
    def __init__(self) -> None:
        super().__init__(CACHE_MAX_SITES, CACHE_SECONDS * 1000)


_cache = _Cache()


def cached(dynamodb: DynamoDB, settings: Settings, site: str, now_ms: int) -> SiteSettings:
    """The site's settings as the beacon uses them: read at most once per CACHE_SECONDS."""
    return _cache.fetch(dynamodb, site, now_ms, lambda: read(dynamodb, settings, site))
