"""Every key prefix of the counts table, in one place, and the numbered sort keys. Pure.
The table of what each prefix holds: docs/design.md, "The counts table"."""

from __future__ import annotations

COUNTER = "CTR#"
FILTER = "FLT#"
SUMMARY = "TOP#"
EVENT_MARKER = "EVT#"
AUDIT_GROUP = "AUQ#"
AUDIT_RUN = "AUDIT#"
VIEW_URL = "URL#"
VIEW_BUCKET = "VWB#"
VIEW_TOP = "VTOP#"
SKETCH = "HLL#"
SKETCH_WINDOW = "HLW#"
REPORT = "REPORT#"
QUARANTINE = "QUARANTINE#"
ACCESS_KEY = "KEY#"
KEY_RATE = "RATE#"
CATALOG = "CATALOG#"
CATALOG_LOG = "#log"  # after CATALOG<kind>: the catalog's log items
CATALOG_PAGES = "#pages"  # after CATALOG<kind>: the catalog's pages
CATALOG_FOLD = "#fold"  # after CATALOG<kind>: the fold's mark
SALT = "SALT#"
SITE = "SITE#"


def index_sort_key(prefix: str, index: int) -> str:
    """`<prefix>#<index>`: the sort key of a numbered item (a bucket's hour or day since the
    epoch), the index zero-padded to 10 digits so that text order is number order."""
    return f"{prefix}#{index:010d}"


def sort_key_index(sort_key: str) -> int:
    """The index of a sort key made by index_sort_key."""
    return int(sort_key.split("#", 1)[1])
