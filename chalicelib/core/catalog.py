"""Catalogs, the one listing of which names exist: docs/design.md, "Which names exist" and "Log and fold";
docs/guarantees.md, "Listings: log items, the fold's mark and pages"."""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from chalicelib.core import attributes, catalog_pages, dynamo, keyspace, log_fold, pager, times
from chalicelib.core.aws import DynamoDB
from chalicelib.core.catalog_pages import Listed
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import ConditionFailed, translated

PAGE_SK = "p#"
LOGS_PER_FOLD = 5000  # bounds a run's memory and time; a longer log takes more runs
# A log item's life (TTL): far longer than any gap between folds (docs/design.md, "Which names exist").
LOG_LIFE_S = 14 * 86_400


def catalog_pk(kind: str) -> str:
    return f"{keyspace.CATALOG}{kind}"


def log_pk(kind: str) -> str:
    return f"{keyspace.CATALOG}{kind}{keyspace.CATALOG_LOG}"


def pages_pk(kind: str) -> str:
    return f"{keyspace.CATALOG}{kind}{keyspace.CATALOG_PAGES}"


class Recent:
    """What a process wrote to one catalog in the current hour, per DynamoDB client (a test with its
    own emulator starts afresh): each name with its expiry, forgotten when the hour turns."""

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
    recent: Recent | None,
    names: Mapping[str, int | None],
    now_ms: int,
) -> int:
    """Record that `names` (each with its expiry, epoch s, or None) were seen now; returns the writes
    made (without `recent`, one per name; with it, none for a name already written this hour)."""
    hour = now_ms // times.HOUR_MS
    fresh = sorted(names) if recent is None else recent.fresh(dynamodb, names, hour)
    for name in fresh:
        key = {"pk": {"S": catalog_pk(kind)}, "sk": {"S": name}}
        failure = f"could not update the {kind} catalog"
        dynamo.move_forward(dynamodb, settings.counts_table, key, "last_seen", {"N": str(now_ms)}, names[name], failure)
    if recent is not None:
        recent.mark(dynamodb, {name: names[name] for name in fresh}, hour)
    return len(fresh)


def log(dynamodb: DynamoDB, settings: Settings, kind: str, names: Mapping[str, int | None], now_ms: int) -> int:
    """Record that `names` (each with its expiry, epoch s, or None) were seen now, in one log item
    (more past LOG_RAW_BYTES) that the fold merges into the pages; returns the writes made."""
    entries = [Listed(name, now_ms, expires) for name, expires in sorted(names.items())]
    writes = 0
    for run in catalog_pages.chunks(entries, catalog_pages.LOG_RAW_BYTES):
        data = catalog_pages.pack(run)
        item = {"e": {"B": data}, "expires_at": {"N": str(now_ms // 1000 + LOG_LIFE_S)}}
        writes += _log(settings, kind).append(dynamodb, item, now_ms, hashlib.sha256(data).hexdigest()[:32])[0]
    return writes


def _log(settings: Settings, kind: str) -> log_fold.Log:
    mark = {"pk": {"S": catalog_pk(kind) + keyspace.CATALOG_FOLD}, "sk": {"S": "#"}}
    return log_fold.Log(settings.counts_table, log_pk(kind), mark, f"the {kind} catalog")


@dataclass(frozen=True)
class Folded:
    """What one fold of one catalog did; `raced`: another fold changed a page first, so the mark
    stayed and the next run folds the same items again."""

    logs: int = 0
    pages_written: int = 0
    pages_deleted: int = 0
    raced: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def fold(dynamodb: DynamoDB, settings: Settings, kind: str, now_ms: int) -> Folded:
    """Merge the log items of `kind` up to now into its pages (docs/design.md, "Log and fold")."""
    log = _log(settings, kind)
    logs = log.close(dynamodb, now_ms, LOGS_PER_FOLD)
    if not logs:
        return Folded()
    request = dynamo.query_request(settings.counts_table, pages_pk(kind), consistent=True)
    read = dynamo.query_items(dynamodb, request, f"could not read the {kind} catalog")
    stored_items = {attributes.sort_key(item).removeprefix(PAGE_SK): item for item in read}
    stored = {low: _entries(item) for low, item in stored_items.items()}
    everything = catalog_pages.union(*stored.values(), *(_entries(item) for item in logs))
    live = {name: e for name, e in everything.items() if e.live(now_ms // 1000)}
    plan = catalog_pages.layout(stored, live, catalog_pages.PAGE_RAW_BYTES)
    try:
        # New pages (split off) before the page they came from is cut, so an entry is always
        # in some page: a fold that dies between leaves it in two, which readers merge.
        for low in sorted(plan.write, key=lambda x: x in stored):
            _write_page(dynamodb, settings, kind, low, plan.write[low], stored_items.get(low))
        for low in plan.delete:
            _delete_page(dynamodb, settings, kind, low, dynamo.stored_version(stored_items[low]))
    except ConditionFailed:
        return Folded(raced=True)
    log.folded(dynamodb, logs)
    return Folded(len(logs), len(plan.write), len(plan.delete))


def fold_all(dynamodb: DynamoDB, settings: Settings, kinds: Sequence[str], now_ms: int) -> dict[str, Any]:
    """The scheduled fold of each catalog in `kinds`: `{"folded": {kind: what it did}}`."""
    return {"folded": {kind: fold(dynamodb, settings, kind, now_ms).as_dict() for kind in kinds}}


def _write_page(
    dynamodb: DynamoDB, settings: Settings, kind: str, low: str, entries: list[Listed], stored: dict[str, Any] | None
) -> None:
    item = {
        "pk": {"S": pages_pk(kind)},
        "sk": {"S": PAGE_SK + low},
        "e": {"B": catalog_pages.pack(entries)},
        "n": {"N": str(len(entries))},
    }
    failure = f"could not write a page of the {kind} catalog"
    dynamo.put_versioned(dynamodb, settings.counts_table, item, dynamo.stored_version(stored), failure)


def _delete_page(dynamodb: DynamoDB, settings: Settings, kind: str, low: str, version: int) -> None:
    with translated(f"could not tidy the {kind} catalog"):
        dynamodb.delete_item(
            TableName=settings.counts_table,
            Key={"pk": {"S": pages_pk(kind)}, "sk": {"S": PAGE_SK + low}},
            **dynamo.versioned_condition(version),
        )


def _logs_to_read(dynamodb: DynamoDB, settings: Settings, kind: str) -> list[dict[str, Any]]:
    return _log(settings, kind).unfolded(dynamodb)


def _entries(item: dict[str, Any]) -> list[Listed]:
    return catalog_pages.unpack(attributes.binary(item, "e"))


def page(
    dynamodb: DynamoDB, settings: Settings, kind: str, request: pager.PageRequest, now_ms: int
) -> tuple[list[Listed], str | None]:
    """Up to `request.limit` live names of a packed catalog after `request.after`, in name order,
    and the next cursor (None at the end); how it reads: docs/design.md, "Which names exist"."""
    now_s = now_ms // 1000
    after = request.after
    # Read in the order opposite to the fold's writes (docs/design.md, "Log and fold").
    logged = [e for item in _logs_to_read(dynamodb, settings, kind) for e in _entries(item)]
    packed, bound = _pages_after(dynamodb, settings, kind, after, request.limit, now_s)
    found = catalog_pages.union(packed, logged)
    # The pages are read completely up to `bound`; past it, a page not read may hold names that
    # belong before the log's.
    names = sorted(
        name
        for name, entry in found.items()
        if (after is None or name > after) and (bound is None or name <= bound) and entry.live(now_s)
    )
    taken = names[: request.limit]
    position = taken[-1] if len(names) > request.limit else bound
    return [found[name] for name in taken], None if position is None else pager.encode_cursor(position)


def touched_page(
    dynamodb: DynamoDB, settings: Settings, kind: str, request: pager.PageRequest, now_ms: int
) -> tuple[list[Listed], str | None]:
    """Up to `request.limit` live names of a per-name catalog (`touch`) after `request.after`, in
    name order, and the cursor of the next page (None at the end): one Query."""
    failure = f"could not read the {kind} catalog"
    got = pager.query_page(
        dynamodb, settings.counts_table, catalog_pk(kind), request, failure, live_at_s=now_ms // 1000, consistent=True
    )
    entries = [
        Listed(attributes.sort_key(i), attributes.integer(i, "last_seen"), dynamo.stored_expiry(i)) for i in got.items
    ]
    return entries, got.next


def _pages_after(
    dynamodb: DynamoDB, settings: Settings, kind: str, after: str | None, want: int, now_s: int
) -> tuple[list[Listed], str | None]:
    """Entries of the pages from the one holding `after` on, until `want` live names after it
    are read; and the name through which they are complete (None: to the end)."""
    entries: list[Listed] = []
    last_sk: str | None = None
    if after is not None:
        holding, _ = _one(dynamodb, settings, kind, "sk <= :s", PAGE_SK + after, forward=False)
        if holding:
            entries += _entries(holding[0])
            last_sk = attributes.sort_key(holding[0])
    while sum(1 for e in entries if (after is None or e.name > after) and e.live(now_s)) < want:
        condition = "sk > :s" if last_sk is not None else "begins_with(sk, :s)"
        got, more = _one(dynamodb, settings, kind, condition, last_sk if last_sk is not None else PAGE_SK)
        if not got:
            return entries, None
        entries += _entries(got[0])
        last_sk = attributes.sort_key(got[0])
        if not more:
            return entries, None
    return entries, max((e.name for e in entries), default=None)


def _one(
    dynamodb: DynamoDB, settings: Settings, kind: str, condition: str, value: str, forward: bool = True
) -> tuple[list[dict[str, Any]], bool]:
    """One page of `kind` whose sort key meets `condition` (on `:s`, `value`): the first in sort-key
    order, or the last when not `forward`; and whether there may be more."""
    table, pk = settings.counts_table, pages_pk(kind)
    request = dynamo.query_request(
        table, pk, sk=condition, values={":s": value}, limit=1, forward=forward, consistent=True
    )
    got = next(dynamo.query_pages(dynamodb, request, f"could not read the {kind} catalog"))
    return list(got.get("Items", [])), "LastEvaluatedKey" in got


def names_with_prefix(
    dynamodb: DynamoDB, settings: Settings, kind: str, prefixes: Sequence[str], now_ms: int
) -> tuple[dict[str, list[str]], int]:
    """For each prefix, the live names of a packed catalog that begin with it, in name order, and
    the items read: the log items once, then two Queries of the pages per prefix."""
    now_s, table, pk = now_ms // 1000, settings.counts_table, pages_pk(kind)
    logs = _logs_to_read(dynamodb, settings, kind)  # before the pages (docs/design.md, "Log and fold")
    logged = [e for item in logs for e in _entries(item)]
    read = len(logs) + 1
    out: dict[str, list[str]] = {}
    for prefix in prefixes:
        holding, _ = _one(dynamodb, settings, kind, "sk <= :s", PAGE_SK + prefix, forward=False)
        values = {":p": PAGE_SK + prefix}
        request = dynamo.query_request(table, pk, sk="begins_with(sk, :p)", values=values, consistent=True)
        within = dynamo.query_items(dynamodb, request, f"could not read the {kind} catalog")
        packed = [e for item in holding + within for e in _entries(item)]
        read += len(holding) + len(within)
        found = catalog_pages.union(packed, logged)
        out[prefix] = sorted(n for n, e in found.items() if n.startswith(prefix) and e.live(now_s))
    return out, read
