"""The dashboard's page and static assets (`static/`, `vendor/`), read once per process: docs/dashboard.md, "Serving
and caching", "The charting library" and "Opening it"; docs/guarantees.md, "The API is under its stage's path"."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from urllib.parse import quote

from chalicelib.core.errors import NotFoundError
from chalicelib.core.static import Asset

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


@functools.lru_cache(maxsize=32)
def asset(name: str) -> Asset:
    """A static or vendored file by its plain name; NotFoundError for anything else."""
    content_type = next((kind for suffix, kind in CONTENT_TYPES.items() if name.endswith(suffix)), None)
    if content_type is None or "/" in name or "\\" in name or name.startswith(".") or name == PAGE:
        raise NotFoundError(f"no dashboard asset {name}")
    for path in (directory / name for directory in DIRECTORIES):
        if path.is_file():
            return Asset(name, path.read_text(encoding="utf-8"), content_type, SECURITY)
    raise NotFoundError(f"no dashboard asset {name}")


def relative_base(request_path: str) -> str:
    """What goes before a path of the API for it to resolve relative to the page at `request_path`
    (docs/dashboard.md, "Opening it"): nothing from `/api/` or `/`, `api/` from `/api`."""
    if not request_path or request_path.endswith("/"):
        return ""
    return quote(request_path.rsplit("/", 1)[1], safe="") + "/"


@functools.lru_cache(maxsize=8)
def page(base: str = "") -> Asset:
    """index.html with `{{base}}` replaced by `base` (relative_base's answer) and each
    `{{asset:<name>}}` by the asset's versioned URL under it."""

    def versioned(match: re.Match[str]) -> str:
        try:
            return f"{base}dashboard/{match[1]}?v={asset(match[1]).version}"
        except NotFoundError as exc:
            raise NotFoundError(f"the dashboard's {match[1]} is missing: run `make vendor`") from exc

    text = (DIRECTORIES[0] / PAGE).read_text(encoding="utf-8").replace("{{base}}", base)
    text = re.sub(r"\{\{asset:(.*?)\}\}", versioned, text, flags=re.DOTALL)
    return Asset(PAGE, text, CONTENT_TYPES[".html"], SECURITY)
