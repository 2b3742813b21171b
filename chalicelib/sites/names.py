"""The names and keys of site analytics, in one place: the counters, unique count and views a
site (its hostname, or the script's `data-site`) is counted under, its salts' keys and its
catalog kind. Pure. What each holds: docs/tracker.md, "How a page view is counted"."""

from __future__ import annotations

from typing import Any

from chalicelib.core import keyspace, validation
from chalicelib.core.errors import ValidationError

CATALOG_KIND = "sites"
SALT_PK = keyspace.SALT
SITE_MAX_CHARS = 180  # so that every name made from a site (the longest fixed prefix is 10) is a name


def salt_key(day: int) -> dict[str, Any]:
    return {"pk": {"S": SALT_PK}, "sk": {"S": keyspace.index_sort_key("d", day)}}


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
