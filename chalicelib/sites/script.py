"""`GET /tally.js`: the tracker script (static/tally.js), read once per process: cached for
FRESH_SECONDS then revalidated by its ETag, or for a year when asked for with its content hash
(`?v=`), since site owners link it without one."""

from __future__ import annotations

import functools
from pathlib import Path

from chalicelib.core.static import Asset

PATH = Path(__file__).resolve().parent / "static" / "tally.js"
FRESH_SECONDS = 3600
MAX_GZIP_BYTES = 1536  # the script's budget, gzipped (a unit test measures it)
HEADERS = {"X-Content-Type-Options": "nosniff"}


@functools.lru_cache(maxsize=1)
def script() -> Asset:
    return Asset("tally.js", PATH.read_text(encoding="utf-8"), "text/javascript; charset=utf-8", HEADERS, FRESH_SECONDS)
