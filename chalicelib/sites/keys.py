"""The names and keys of site analytics, in one place. Pure.

A site (its hostname, or the script's `data-site`) is counted under Tally's own names:
    counter  site:<site>               one event per page view, dimensions page, referrer,
                                       source (utm_source) and device
    counter  site-utm:<site>           one event per page view that carries UTM fields,
                                       dimensions source, medium, campaign
    counter  site-event:<site>:<name>  custom events (`tally(name, ...)`), the caller's dimensions
    unique   site:<site>               the site's visitors (hour and day sketches)
    views    the page's URL            exact page views per URL
The counts table holds the salts (SALT# / d#<day>) and the catalog of sites (CATALOG#sites).
"""

from __future__ import annotations

from typing import Any

from chalicelib.core import keyspace, validation

CATALOG_KIND = "sites"
PAGEVIEW_DIMENSIONS = ("page", "referrer", "source", "device")
UTM_DIMENSIONS = ("source", "medium", "campaign")
SALT_PK = keyspace.SALT


def salt_key(day: int) -> dict[str, Any]:
    return {"pk": {"S": SALT_PK}, "sk": {"S": keyspace.index_sort_key("d", day)}}


def site_name(value: Any, field: str = "site") -> str:
    """A site as names go: 1-200 of `A-Z a-z 0-9 _ . : -` (a hostname is one)."""
    return validation.name(value, field)


def pageview_counter(site: str) -> str:
    return f"site:{site}"


def utm_counter(site: str) -> str:
    return f"site-utm:{site}"


def event_counter(site: str, name: str) -> str:
    return f"site-event:{site}:{name}"


def visitors_name(site: str) -> str:
    return f"site:{site}"
