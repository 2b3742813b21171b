"""The decimal context every exact sum adds in. Pure.

DynamoDB numbers carry up to 38 significant digits with exponents from -130 to +125; the sum of
many of them at different exponents needs more digits than any one of them. Python's default
context rounds to 28 digits, so counters, breakdowns and reports all add with EXACT instead:
with 200 digits a sum is exact while its digits, from the largest to the smallest place any
value added has, span at most 200 places.
"""

from __future__ import annotations

from decimal import Context

EXACT = Context(prec=200)
