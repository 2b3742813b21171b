"""The dashboard's page and static assets, served by the app itself (`GET /`, `GET /dashboard/...`).

Files come from `static/` (the page, its script and styles) and `vendor/` (the charting library
and its license, fetched by `make vendor`). They are read once per process. The page names each
asset with a version (`?v=<hash of its content>`): an asset asked for with its current version
may be cached for a year (`immutable`); the page itself and anything else are revalidated with
an ETag on every load, so a new deployment shows at once. Nothing is loaded from elsewhere, and
the Content-Security-Policy says so.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from chalicelib.core.errors import NotFoundError

HERE = Path(__file__).resolve().parent
DIRECTORIES = (HERE / "static", HERE / "vendor")
PAGE = "index.html"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".LICENSE": "text/plain; charset=utf-8",
}
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
# Scripts and styles only from this origin; uPlot sizes its elements with inline styles.
SECURITY = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@dataclass(frozen=True)
class Asset:
    name: str
    body: str
    content_type: str

    @functools.cached_property
    def version(self) -> str:
        return hashlib.sha256(self.body.encode("utf-8")).hexdigest()[:16]

    @property
    def etag(self) -> str:
        return f'"{self.version}"'

    def answer(
        self, if_none_match: str | None, version: str | None = None
    ) -> tuple[int, dict[str, str | list[str]], str]:
        """Status, headers and body: 304 when the client's copy is current."""
        cache = IMMUTABLE if version == self.version else REVALIDATE
        headers: dict[str, str | list[str]] = {
            "Content-Type": self.content_type,
            "Cache-Control": cache,
            "ETag": self.etag,
            **SECURITY,
        }
        if if_none_match is not None and self.etag in [tag.strip() for tag in if_none_match.split(",")]:
            return 304, headers, ""
        return 200, headers, self.body


def _content_type(name: str) -> str | None:
    for suffix, content_type in CONTENT_TYPES.items():
        if name.endswith(suffix):
            return content_type
    return None


@functools.lru_cache(maxsize=32)
def asset(name: str) -> Asset:
    """A static or vendored file by its plain name; NotFoundError for anything else."""
    content_type = _content_type(name)
    if content_type is None or "/" in name or "\\" in name or name.startswith(".") or name == PAGE:
        raise NotFoundError(f"no dashboard asset {name}")
    for directory in DIRECTORIES:
        path = directory / name
        if path.is_file():
            return Asset(name, path.read_text(encoding="utf-8"), content_type)
    raise NotFoundError(f"no dashboard asset {name}")


@functools.lru_cache(maxsize=1)
def page() -> Asset:
    """index.html with each `{{asset:<name>}}` replaced by the asset's versioned URL."""
    text = (DIRECTORIES[0] / PAGE).read_text(encoding="utf-8")
    start = text.find("{{asset:")
    while start != -1:
        end = text.index("}}", start)
        name = text[start + len("{{asset:") : end]
        try:
            version = asset(name).version
        except NotFoundError as exc:
            raise NotFoundError(f"the dashboard's {name} is missing: run `make vendor`") from exc
        text = text[:start] + f"/dashboard/{name}?v={version}" + text[end + 2 :]
        start = text.find("{{asset:", start)
    return Asset(PAGE, text, CONTENT_TYPES[".html"])
