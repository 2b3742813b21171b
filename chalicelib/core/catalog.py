"""Catalogs: which names exist, written rarely as they are counted, read a page at a time.

A catalog is one partition of the counts table, `CATALOG#<kind>` (keyspace), with one item per
name (sk) holding `last_seen` (epoch ms) and, when the names themselves expire, `expires_at`.
Writing one is kept off the hot path's cost: a process writes a name's item once per hour
(`Recent` remembers which it wrote; again only if the name now needs a later expiry), with a condition that only moves `last_seen` forward,
so `last_seen` is accurate to the hour and a name costs one small write per hour per process.

Listings page through core.pager: its cursor names a sort key within the catalog's own partition.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chalicelib.core import attributes, keyspace, pager, times
from chalicelib.core.aws import DynamoDB
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import ConditionFailed, translated


def catalog_pk(kind: str) -> str:
    return f"{keyspace.CATALOG}{kind}"


# -- writes --------------------------------------------------------------------------------


class Recent:
    """What a process wrote to one catalog in the current hour (one instance per catalog), per
    DynamoDB client (a test with its own emulator starts afresh): each name with the expiry
    written. Forgotten when the hour turns, so bounded by the names seen in one hour."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: weakref.WeakKeyDictionary[DynamoDB, tuple[int, dict[str, int | None]]] = weakref.WeakKeyDictionary()

    def _written(self, client: DynamoDB, hour: int) -> dict[str, int | None]:
        seen_hour, written = self._seen.get(client, (hour, {}))
        return written if seen_hour == hour else {}

    def fresh(self, client: DynamoDB, names: Mapping[str, int | None], hour: int) -> list[str]:
        """Names not written this hour, or written with an earlier expiry than they need now."""
        with self._lock:
            written = self._written(client, hour)
        return sorted(
            name
            for name, expires in names.items()
            if name not in written or (expires is not None and expires > (written[name] or 0))
        )

    def mark(self, client: DynamoDB, names: Mapping[str, int | None], hour: int) -> None:
        with self._lock:
            written = self._written(client, hour)
            written.update(names)
            self._seen[client] = (hour, written)


def touch(
    dynamodb: DynamoDB,
    settings: Settings,
    kind: str,
    recent: Recent,
    names: Mapping[str, int | None],
    now_ms: int,
) -> int:
    """Record that `names` were seen now; `names` maps each to its expiry (epoch s) or None
    for a name that never expires. Returns the number of writes made (0 when every name was
    already written this hour)."""
    hour = now_ms // times.HOUR_MS
    fresh = recent.fresh(dynamodb, names, hour)
    for name in fresh:
        expires = names[name]
        values: dict[str, Any] = {":t": {"N": str(now_ms)}}
        update = "SET last_seen = :t"
        if expires is not None:
            update += ", expires_at = :exp"
            values[":exp"] = {"N": str(expires)}
        # Concurrent writers: last_seen only moves forward.
        _update_entry(
            dynamodb, settings, kind, name, update, "attribute_not_exists(last_seen) OR last_seen < :t", values
        )
    recent.mark(dynamodb, {name: names[name] for name in fresh}, hour)
    return len(fresh)


def extend(dynamodb: DynamoDB, settings: Settings, kind: str, names: Mapping[str, int], now_ms: int) -> int:
    """Record that `names` were seen now, each living until at least its expiry (epoch s): one
    write per name, which changes nothing when the stored entry already lives longer (its expiry
    only moves forward). For callers that know when a name needs listing; returns the writes."""
    for name, expires in sorted(names.items()):
        # Concurrent writers: the expiry only grows, and last_seen only moves forward.
        _update_entry(
            dynamodb,
            settings,
            kind,
            name,
            "SET last_seen = :t, expires_at = :exp",
            "attribute_not_exists(expires_at) OR expires_at < :exp OR (expires_at = :exp AND last_seen < :t)",
            {":t": {"N": str(now_ms)}, ":exp": {"N": str(expires)}},
        )
    return len(names)


def _update_entry(
    dynamodb: DynamoDB,
    settings: Settings,
    kind: str,
    name: str,
    update: str,
    condition: str,
    values: dict[str, Any],
) -> None:
    """One conditional write of a catalog entry; a failed condition means a writer that knew
    better got there first, which leaves nothing to do."""
    try:
        with translated(f"could not update the {kind} catalog"):
            dynamodb.update_item(
                TableName=settings.counts_table,
                Key={"pk": {"S": catalog_pk(kind)}, "sk": {"S": name}},
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
            )
    except ConditionFailed:
        pass


# -- reads ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    name: str
    last_seen_ms: int


def page(
    dynamodb: DynamoDB, settings: Settings, kind: str, request: pager.PageRequest, now_ms: int
) -> tuple[list[Entry], str | None]:
    """Up to `request.limit` live names after `request.after`, in name order, and the cursor of
    the next page (None at the end). One Query; a page may hold fewer names when some expired."""
    found = pager.query_page(
        dynamodb,
        settings.counts_table,
        catalog_pk(kind),
        request,
        f"could not read the {kind} catalog",
        live_at_s=now_ms // 1000,
    )
    return [Entry(attributes.sort_key(i), attributes.integer(i, "last_seen")) for i in found.items], found.next
