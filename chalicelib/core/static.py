"""A file the app serves itself (the dashboard's files, the tracker script), versioned by a
hash of its content. Pure. Its caching: docs/dashboard.md and docs/api.md."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Asset:
    name: str
    body: str
    content_type: str
    headers: Mapping[str, str] = field(default_factory=dict)
    fresh_seconds: int = 0

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
        fresh = f"public, max-age={self.fresh_seconds}" if self.fresh_seconds else "no-cache"
        headers: dict[str, str | list[str]] = {
            "Content-Type": self.content_type,
            "Cache-Control": "public, max-age=31536000, immutable" if version == self.version else fresh,
            "ETag": self.etag,
            **self.headers,
        }
        if if_none_match is not None and self.etag in [tag.strip() for tag in if_none_match.split(",")]:
            return 304, headers, ""
        return 200, headers, self.body
