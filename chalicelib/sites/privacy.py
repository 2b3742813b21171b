"""What a page-view beacon becomes before anything is counted: the visitor id (never stored), known
bots, the device class, the page path, referrer host and UTM fields, and the URL a page is counted
under. Pure. docs/tracker.md, "Privacy: what is collected and what is not"."""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

SALT_BYTES = 32
NONE = "(none)"
DIRECT = "(direct)"
UNKNOWN = "(unknown)"
DIMENSION_MAX_CHARS = 128  # a dimension value's bound (events)

# Substrings (case-insensitive) of self-declared bots' user agents, kept short on purpose
# (docs/tracker.md, "Bots").
BOT_PATTERNS = (
    "bot",  # Googlebot, bingbot, AhrefsBot, Applebot, DuckDuckBot, YandexBot, Twitterbot ...
    "crawl",  # crawler, Crawl
    "spider",  # Baiduspider, spider
    "slurp",  # Yahoo
    "headless",  # HeadlessChrome
    "lighthouse",  # Chrome-Lighthouse, PageSpeed
    "pingdom",
    "uptime",
    "monitor",
    "preview",  # BingPreview, link previews
    "facebookexternalhit",
    "embedly",
    "mediapartners",  # Google AdSense
    "feedfetcher",
    "phantomjs",
    "curl/",
    "wget/",
    "python-",  # python-requests, python-urllib, python-httpx
    "go-http-client",
    "java/",
    "okhttp",
    "axios/",
    "node-fetch",
    "httpclient",
    "scrapy",
)
_BOT = re.compile("|".join(re.escape(p) for p in BOT_PATTERNS), re.IGNORECASE)

# Device classes by viewport width in CSS pixels, as Plausible's script groups them.
DEVICE_CLASSES = ((576, "mobile"), (992, "tablet"), (1440, "laptop"))
UTM_FIELDS = ("utm_source", "utm_medium", "utm_campaign")


def visitor_id(salt: bytes, site: str, ip: str, user_agent: str) -> str:
    """HMAC-SHA256 keyed with the day's salt over the site, IP and user agent, 128 bits in hex."""
    if len(salt) < SALT_BYTES:
        raise ValueError("a salt is 32 random bytes")
    return hmac.new(salt, framed(site, ip, user_agent), hashlib.sha256).hexdigest()[:32]


def framed(*parts: str) -> bytes:
    """The parts as one message, each length-prefixed, so no two different lists make the same."""
    return b"".join(len(b).to_bytes(4, "big") + b for b in (p.encode("utf-8") for p in parts))


def is_bot(user_agent: str | None) -> bool:
    """True for no user agent, or one holding a BOT_PATTERNS entry."""
    return not user_agent or not user_agent.strip() or _BOT.search(user_agent) is not None


def device(width: int | None) -> str:
    """mobile (< 576 px), tablet (< 992), laptop (< 1440), desktop; (unknown) without a width."""
    if width is None:
        return UNKNOWN
    return next((name for bound, name in DEVICE_CLASSES if width < bound), "desktop")


@dataclass(frozen=True)
class Page:
    """What one page URL (and its referrer) tells: the site's host, the path, the referrer's
    host (DIRECT when none, or the site itself) and the UTM fields (NONE when absent)."""

    host: str
    path: str
    referrer: str
    utm_source: str
    utm_medium: str
    utm_campaign: str

    @property
    def has_utm(self) -> bool:
        return any(v != NONE for v in (self.utm_source, self.utm_medium, self.utm_campaign))


def clip(value: str) -> str:
    return value[:DIMENSION_MAX_CHARS]


def page(url: str, referrer: str | None) -> Page:
    """The page a URL names; ValueError when it is not an http(s) URL with a host. The path
    keeps the route of a fragment (route) and drops the query."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        raise ValueError("not an http(s) URL with a host")
    path = (parts.path or "/") + route(parts.fragment)
    query = parse_qs(parts.query)
    utm = [clip(query.get(name, [""])[0].strip()) or NONE for name in UTM_FIELDS]
    return Page(host, clip(path), referrer_host(referrer, host), *utm)


def page_url(url: str) -> str:
    """The URL a page's views are counted under: scheme, host, path and a fragment's route
    (docs/tracker.md, "What is stored"). ValueError as page()."""
    parts = urlsplit(url)
    host = page(url, None).host
    netloc = f"[{host}]" if ":" in host else host  # an IPv6 address keeps its brackets
    return f"{parts.scheme}://{netloc}{parts.path or '/'}{route(parts.fragment)}"


def route(fragment: str) -> str:
    """`#` and the path of a hash route, without its query (docs/tracker.md, "Privacy"); "" for none."""
    path = fragment.split("?", 1)[0]
    return f"#{path}" if path else ""


def referrer_host(referrer: str | None, own_host: str) -> str:
    """The referrer's host without `www.`; DIRECT for none, an unparsable one or the site itself."""
    try:
        host = (urlsplit(referrer or "").hostname or "").lower()
    except ValueError:
        return DIRECT
    return DIRECT if not host or host == own_host else clip(host.removeprefix("www."))
