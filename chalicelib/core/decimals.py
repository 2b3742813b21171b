"""The decimal context every exact sum adds in (200 digits; Python's default rounds to 28). Pure.
docs/counting.md, "Values and their sums"."""

from __future__ import annotations

from decimal import Context

EXACT = Context(prec=200)
