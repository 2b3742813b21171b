"""Tracker keys: which sites one counts (`site_matches`) and what a page-view beacon sent with one may hold
(`check_pageview`). Pure. docs/access.md, "Tracker keys"."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from chalicelib.core import inputs, times
from chalicelib.core.errors import ValidationError

MAX_SITES = 50
WILDCARD = "*."
# A hostname as a URL's host is read (lower case): labels of letters, digits and hyphens, at most
# SITE_MAX_CHARS in all (DNS's longest name), `*.` first for every subdomain.
SITE_PATTERN = re.compile(r"(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")
SITE_MAX_CHARS = 253
# How old a tracker key's page view may be: a browser sends it at once (a few minutes of clock skew).
MAX_AGE_MS = 5 * times.MINUTE_MS
# The bound of every value of a custom event a tracker key sends (an amount, a duration).
VALUE_MIN, VALUE_MAX = 0, 1_000_000
DEFAULT_PORTS = {"http": 80, "https": 443}
# A status and its reason: 400, a beacon this check cannot read; 403, one the key may not send.
Refusal = tuple[int, str]


def parse_sites(sites: Any) -> tuple[str, ...]:
    """A new tracker key's sites, kept as given without a leading `www.` (docs/access.md, "Tracker keys")."""
    if not isinstance(sites, list) or not 1 <= len(sites) <= MAX_SITES:
        raise ValidationError(f"a tracker key needs sites: a list of 1-{MAX_SITES} hostnames such as blog.example")
    if not all(
        isinstance(site, str) and len(site) <= SITE_MAX_CHARS and SITE_PATTERN.fullmatch(site) for site in sites
    ):
        raise ValidationError("each site is a hostname such as blog.example, or *.blog.example for its subdomains")
    return tuple(dict.fromkeys(_without_www(site) for site in sites))


def _without_www(host: str) -> str:
    return host if host.startswith(WILDCARD) else host.removeprefix("www.")


def site_matches(sites: Sequence[str], host: str) -> bool:
    """True when the page host `host` is one of `sites` (docs/access.md, "Tracker keys")."""
    bare = _without_www(host)
    return any(
        host.endswith("." + site[len(WILDCARD) :]) if site.startswith(WILDCARD) else bare == site for site in sites
    )


def check_pageview(
    sites: Sequence[str], raw_body: str | bytes | None, origin: str | None, now_ms: int
) -> Refusal | None:
    """None when a tracker key with these sites may send this beacon, else why not."""
    try:
        body = inputs.json_body(raw_body)
    except ValidationError as exc:
        return 400, str(exc)
    if not isinstance(body, dict) or not isinstance(body.get("url"), str):
        return 400, 'the body must be a JSON object with the page\'s "url"'
    try:
        page = urlsplit(body["url"])
        host, port = (page.hostname or "").lower(), page.port
    except ValueError:
        return 400, "url must be an http(s) URL with a host"
    if page.scheme not in DEFAULT_PORTS or not host:
        return 400, "url must be an http(s) URL with a host"
    if not site_matches(sites, host):
        return 403, f"this key counts only the sites {', '.join(sites)}: not {host[:200]!r}"
    if not _same_origin(origin, page.scheme, host, port):
        return 403, "a tracker key's beacon must come from its page: Origin must be the page URL's origin"
    site = body.get("site")
    if site is not None and (not isinstance(site, str) or _without_www(site) != _without_www(host)):
        return 403, "with a tracker key, site must be the page URL's host"
    try:
        time_ms = times.parse(body.get("time"), "time")
    except ValidationError as exc:
        return 400, str(exc)
    if time_ms < now_ms - MAX_AGE_MS:
        return 403, f"a tracker key's page view is at most {MAX_AGE_MS // 1000} s old"
    values = body.get("values")
    if isinstance(values, dict) and not all(
        isinstance(v, int | float) and not isinstance(v, bool) and VALUE_MIN <= v <= VALUE_MAX for v in values.values()
    ):
        return 403, f"a tracker key's custom event values are numbers from {VALUE_MIN} to {VALUE_MAX}"
    return None


def _same_origin(origin: str | None, scheme: str, host: str, port: int | None) -> bool:
    """`Origin` (`scheme://host[:port]`) names the page's scheme and host, and its port when the
    page URL gives one (default ports compared as the numbers they stand for)."""
    if not origin:
        return False
    try:
        parts = urlsplit(origin)
        origin_host, origin_port = (parts.hostname or "").lower(), parts.port
    except ValueError:
        return False
    if parts.scheme != scheme or origin_host != host or parts.path or parts.query or parts.username:
        return False
    return port is None or (origin_port or DEFAULT_PORTS[scheme]) == port
