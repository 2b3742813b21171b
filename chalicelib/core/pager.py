"""The one pager every `GET` that lists goes through (`limit`, the opaque `cursor`, `next`). How
a cursor is made and checked, and what a page costs: docs/design.md, "Listings"."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chalicelib.core import attributes, dynamo, inputs, validation
from chalicelib.core.aws import DynamoDB
from chalicelib.core.errors import ValidationError

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_CURSOR_CHARS = 1024


def encode_cursor(position: str) -> str:
    return base64.urlsafe_b64encode(position.encode("utf-8")).decode("ascii").rstrip("=")


def decode_cursor(raw: str | None, check: Callable[[str], object]) -> str | None:
    """The position a cursor stands for, or None for the first page; ValidationError (400) for
    a cursor this API did not give out. `check` validates the position (raising ValidationError)."""
    if raw is None or raw == "":
        return None
    bad = ValidationError("cursor is not one this API gave out: pass the `next` of the previous page unchanged")
    if len(raw) > MAX_CURSOR_CHARS:
        raise bad
    try:
        position = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode("utf-8")
        check(position)
    except (binascii.Error, ValueError, ValidationError) as exc:
        raise bad from exc
    return position


def page_limit(raw: str | None, default: int = DEFAULT_LIMIT, most: int = MAX_LIMIT) -> int:
    """The `limit` of a listing: every listing reads it here."""
    if raw is None:
        return default
    return validation.integer(inputs.digits(raw, "limit", len(str(most))), "limit", 1, most)


@dataclass(frozen=True)
class PageRequest:
    """A listing's parsed query parameters: the position to start after, and the page size."""

    after: str | None
    limit: int


def page_request(params: Mapping[str, str], check: Callable[[str], object]) -> PageRequest:
    """`cursor` and `limit` of a listing, both checked before any read (400 when bad)."""
    return PageRequest(decode_cursor(params.get("cursor"), check), page_limit(params.get("limit")))


@dataclass(frozen=True)
class Page:
    """Items of one page, in the listing's order, and the position after which the next page
    starts (None at the end); `next` is that position as the cursor a client is given."""

    items: list[dict[str, Any]]
    after: str | None

    @property
    def next(self) -> str | None:
        return None if self.after is None else encode_cursor(self.after)


def query_page(
    dynamodb: DynamoDB,
    table: str,
    pk: str,
    page: PageRequest,
    failure: str,
    *,
    newest_first: bool = False,
    live_at_s: int | None = None,
    consistent: bool = False,
) -> Page:
    """One Query of partition `pk` after `page.after` (docs/design.md, "Listings"); with `live_at_s` expired items
    are left out, so a page may hold fewer than `limit` while `next` is given."""
    request = dynamo.query_request(
        table,
        pk,
        limit=page.limit,
        forward=not newest_first,
        consistent=consistent,
        live_at_s=live_at_s,
        start_after=page.after,
    )
    first = next(dynamo.query_pages(dynamodb, request, failure))
    last = first.get("LastEvaluatedKey")
    return Page(list(first.get("Items", [])), attributes.sort_key(last) if last else None)


def split_position(position: str, labels: Sequence[str]) -> tuple[str, str]:
    """(label, sort key) of a position across partitions; ValueError if the label is unknown."""
    label, sep, sk = position.partition("#")
    if not sep or label not in labels:
        raise ValueError("no such partition")
    return label, sk


def query_across(
    dynamodb: DynamoDB, table: str, partitions: Mapping[str, str], page: PageRequest, failure: str
) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
    """One page over several partitions in turn (`partitions`: label to pk, in listing order): each
    item with its label, and the `next` cursor (`page.after` already checked against the labels)."""
    labels = list(partitions)
    start, after = 0, None
    if page.after is not None:
        label, sk = split_position(page.after, labels)
        start, after = labels.index(label), sk or None
    found: list[tuple[str, dict[str, Any]]] = []
    for index in range(start, len(labels)):
        label = labels[index]
        got = query_page(dynamodb, table, partitions[label], PageRequest(after, page.limit - len(found)), failure)
        found += [(label, item) for item in got.items]
        after = None
        if got.after is not None:  # this partition has more (or may have): resume inside it
            return found, encode_cursor(f"{label}#{got.after}")
        if len(found) >= page.limit and index + 1 < len(labels):  # full: the next partition from its start
            return found, encode_cursor(f"{labels[index + 1]}#")
    return found, None
