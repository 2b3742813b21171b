"""The names and keys of site analytics, in one place: a site's counters and unique counts, its
goals', the keys of its salts and settings, and its catalog kind. Pure. What each holds:
docs/tracker.md, "How a page view is counted", "Goals" and "Right now"."""

from __future__ import annotations

from typing import Any

from chalicelib.core import keyspace, times, validation, window_params
from chalicelib.core.errors import ValidationError

CATALOG_KIND = "sites"
PAGEVIEW = "pageview"  # the beacon's event of a page view; every other event is a custom event
# How long a site's page views (its events) are kept: the longest window a summary answers
# (docs/tracker.md, "What you see").
RETENTION_SECONDS = window_params.MAX_WINDOW_DAYS * times.DAY_MS // 1000
SITE_MAX_CHARS = 180  # so that every name made from a site (the longest fixed prefix is 10) is a name


def settings_key(site: str) -> dict[str, Any]:
    return {"pk": {"S": f"{keyspace.SITE}{site}"}, "sk": {"S": "settings"}}


def salt_key(day: int) -> dict[str, Any]:
    return {"pk": {"S": keyspace.SALT}, "sk": {"S": keyspace.index_sort_key("d", day)}}


def site_name(value: Any, field: str = "site") -> str:
    """A site as names go: 1-180 of `A-Z a-z 0-9 _ . : -` (a hostname is one)."""
    name = validation.name(value, field)
    if len(name) > SITE_MAX_CHARS:
        raise ValidationError(f"{field} must be at most {SITE_MAX_CHARS} characters")
    return name


def pageview_counter(site: str) -> str:
    return f"site:{site}"


def utm_counter(site: str) -> str:
    return f"site-utm:{site}"


def bots_counter(site: str) -> str:
    return f"site-bots:{site}"


def event_counter(site: str, name: str) -> str:
    return f"site-event:{site}:{name}"


def visitors_name(site: str) -> str:
    return f"site:{site}"


def goal_visitors_name(site: str, goal_id: str) -> str:
    """At most 5 + 180 + 1 + 14 = 200 characters: a name (goal ids are 14 hex characters)."""
    return f"goal:{site}:{goal_id}"
