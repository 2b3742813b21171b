"""The dashboard's page and static assets (`static/`, and `vendor/` fetched by `make vendor`),
read once per process, each named with its content hash relative to the page's URL. Caching,
the Content-Security-Policy and why every URL is relative: docs/dashboard.md, "Serving and
caching" and "Opening it"; docs/guarantees.md, "The API is under its stage's path"."""

from __future__ import annotations

import functools
from pathlib import Path
from urllib.parse import quote

from chalicelib.core.errors import NotFoundError
from chalicelib.core.static import IMMUTABLE, REVALIDATE, Asset

__all__ = ["IMMUTABLE", "REVALIDATE", "Asset", "asset", "page", "relative_base"]

HERE = Path(__file__).resolve().parent
DIRECTORIES = (HERE / "static", HERE / "vendor")
PAGE = "index.html"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".LICENSE": "text/plain; charset=utf-8",
}
# Scripts and styles only from this origin; uPlot sizes its elements with inline styles.
SECURITY = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


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
            return Asset(name, path.read_text(encoding="utf-8"), content_type, SECURITY)
    raise NotFoundError(f"no dashboard asset {name}")


def relative_base(request_path: str) -> str:
    """What goes before a path of the API (`dashboard/...`, `openapi.json`) for it to resolve,
    relative to the page at `request_path` (the root resource's whole path as the client asked
    for it), under the API's base: nothing from `/api/` or `/`, `api/` from `/api`."""
    if not request_path or request_path.endswith("/"):
        return ""
    return quote(request_path.rsplit("/", 1)[1], safe="") + "/"


@functools.lru_cache(maxsize=8)
def page(base: str = "") -> Asset:
    """index.html with `{{base}}` replaced by `base` (relative_base's answer) and each
    `{{asset:<name>}}` by the asset's versioned URL under it."""
    text = (DIRECTORIES[0] / PAGE).read_text(encoding="utf-8").replace("{{base}}", base)
    start = text.find("{{asset:")
    while start != -1:
        end = text.index("}}", start)
        name = text[start + len("{{asset:") : end]
        try:
            version = asset(name).version
        except NotFoundError as exc:
            raise NotFoundError(f"the dashboard's {name} is missing: run `make vendor`") from exc
        text = text[:start] + f"{base}dashboard/{name}?v={version}" + text[end + 2 :]
        start = text.find("{{asset:", start)
    return Asset(PAGE, text, CONTENT_TYPES[".html"], SECURITY)
