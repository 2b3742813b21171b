"""The events-table item format: packing a request's events (`pack`, `split`) and unpacking them
(`unpack`, `events_in`, the one way every reader reads an item). Pure. The layouts and why:
docs/counting.md, "Packs"; docs/guarantees.md, "The item size limit"."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import Any, TypeGuard

EVENT_KIND = "event"
PACK_KIND = "pack"
KINDS = (EVENT_KIND, PACK_KIND)
PACK_MAX_BYTES = 360_000  # a margin below DynamoDB's item limit, 400 KB (409,600 bytes)
PACK_LEVEL = ("pk", "sk", "kind", "ingested_at", "expires_at")
SHORT_NAMES = dict(
    counter="c", id="i", id_given="g", time="t", retention="r", attributes="a", dimensions="d", values="v"
)
EXPIRES = "x"
LONG_NAMES = {short: name for name, short in SHORT_NAMES.items()} | {EXPIRES: "expires_at"}
OMITTED_WHEN_EMPTY = ("id_given", "attributes")  # an entry keeps `g` only when true
EVENTS = "e"
COUNT = "n"
OFFSET = "o"


class PackFormatError(ValueError):
    """A pack item that does not hold a list of events."""


def pack(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One item holding the events of `items` (one-event items of one request: same pk, sk,
    ingest time); a single item is returned as it is."""
    if len(items) == 1:
        return dict(items[0])
    first = items[0]
    ingested = int(first["ingested_at"])
    expires = max(int(i["expires_at"]) for i in items)
    return {
        "pk": first["pk"],
        "sk": first["sk"],
        "kind": PACK_KIND,
        "ingested_at": ingested,
        "expires_at": expires,
        COUNT: len(items),
        EVENTS: [_entry(i, ingested, expires) for i in items],
    }


def _entry(item: dict[str, Any], ingested: int, pack_expires: int) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    for name, value in item.items():
        if name == "time":
            entry["t"] = int(value) - ingested
        elif name not in PACK_LEVEL and (value or name not in OMITTED_WHEN_EMPTY):
            entry[SHORT_NAMES.get(name, name)] = value
    if int(item["expires_at"]) < pack_expires:
        entry[EXPIRES] = int(item["expires_at"])
    return entry


def split(items: Sequence[dict[str, Any]], size: Callable[[dict[str, Any]], int]) -> list[list[int]]:
    """The indexes of `items` cut into runs, in order, each of whose pack `size` says is at most
    PACK_MAX_BYTES (an item alone always makes a run)."""
    if len(items) <= 1 or size(pack(items)) <= PACK_MAX_BYTES:
        return [list(range(len(items)))]  # the usual case: sized once
    runs: list[list[int]] = [[]]
    for index in range(len(items)):
        if runs[-1] and size(pack([items[i] for i in [*runs[-1], index]])) > PACK_MAX_BYTES:
            runs.append([])
        runs[-1].append(index)
    return runs


def is_pack(item: dict[str, Any]) -> bool:
    return item.get("kind") == PACK_KIND


def count(item: dict[str, Any]) -> int:
    """Events an item holds: `n` of a pack, one for an item of the one-event layout."""
    n = item.get(COUNT)
    return int(n) if is_pack(item) and _number(n) and n >= 0 else 1


def unpack(item: dict[str, Any]) -> list[tuple[int | None, dict[str, Any]]]:
    """The events an item holds, each as its one-event item with its index in the pack (None for
    the one-event layout). PackFormatError if the pack's list cannot be read; an entry that is not
    a map comes back as an empty event, for the validation of each event to refuse."""
    if not is_pack(item):
        return [(None, item)]
    entries = item.get(EVENTS)
    if not isinstance(entries, list):
        raise PackFormatError("a pack holds no list of events")
    offset = item.get(OFFSET, 0)
    if not _number(offset) or offset < 0:
        raise PackFormatError("a pack's first index is not a count")
    ingested = item.get("ingested_at")
    if not _number(ingested):
        raise PackFormatError("a pack has no ingest time")
    return [(int(offset) + k, _event(item, entry, int(ingested))) for k, entry in enumerate(entries)]


def _event(item: dict[str, Any], entry: Any, ingested: int) -> dict[str, Any]:
    event: dict[str, Any] = {name: item[name] for name in PACK_LEVEL if name in item}
    event["kind"] = EVENT_KIND
    if not isinstance(entry, dict):
        return event
    event["id_given"] = entry.get("g") is True
    event["attributes"] = {}
    for name, value in entry.items():
        if name == "t":
            event["time"] = value + ingested if _number(value) else value
        elif name != "g":
            event[LONG_NAMES.get(str(name), str(name))] = value
    return event


def _number(value: Any) -> TypeGuard[int | Decimal]:
    return isinstance(value, int | Decimal) and not isinstance(value, bool)


def events_in(item: dict[str, Any], now_s: int | None = None) -> Iterator[dict[str, Any]]:
    """Every event of an item that can be read (none of a pack whose list cannot be), as its one-event
    item; with `now_s`, only those within their own retention (docs/counting.md, "Packs")."""
    try:
        unpacked = unpack(item)
    except PackFormatError:
        return
    for _, event in unpacked:
        expires = event.get("expires_at")
        if now_s is None or not _number(expires) or expires >= now_s:
            yield event
