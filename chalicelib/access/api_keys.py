"""Access keys as text: generation (`tly_` and 256 random bits), the stored SHA-256, the public
id, the bearer header. Pure. Why a fast hash suffices: docs/access.md, "Keys"."""

from __future__ import annotations

import hashlib
import re
import secrets

KEY_PREFIX = "tly_"
KEY_PATTERN = re.compile(r"tly_[A-Za-z0-9_-]{43}")
ID_PATTERN = re.compile(r"[0-9a-f]{16}")
DIGEST_PATTERN = re.compile(r"[0-9a-f]{64}")
BEARER = "bearer "


def generate() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def is_well_formed(key: str) -> bool:
    return KEY_PATTERN.fullmatch(key) is not None


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def key_id(key_digest: str) -> str:
    return key_digest[:16]


def from_bearer(header: str | None) -> str | None:
    """The key in `Authorization: Bearer <key>`, or None when absent or not of that form."""
    if not header or header[: len(BEARER)].lower() != BEARER:
        return None
    key = header[len(BEARER) :].strip()
    return key if is_well_formed(key) else None
