"""The breakdown summary writes: a shard's records merged into a bucket's summary, exactly once;
also the replay's puts of one event and the repair's rebuild. Why this is exact: docs/counting.md,
"The proof for summaries" and "Breakdowns"; docs/guarantees.md, "Read, then write on condition"."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from chalicelib.core import attributes, dynamo, timebuckets, transactions
from chalicelib.core.aws import DynamoDB
from chalicelib.core.errors import StorageError
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import ConditionFailed
from chalicelib.core.timebuckets import Bucket
from chalicelib.counters import layout, topk
from chalicelib.counters.countable import Countable
from chalicelib.events.ingest import Event

MAX_ROUNDS = 8
SINGLE_BYTES = 3_500  # entries a bucket's summary keeps in one item before it is split ("Breakdowns")

Member = tuple[Countable, str]  # a record and its entry: the value (days), minute and value (hours)
ItemId = tuple[str, int, int]  # one item of a bucket's summary: resolution ("quarter" too), index, part


@dataclass(frozen=True, order=True)
class Target:
    """The summary of one counter's dimension in one bucket (whose end and retention it is kept by),
    as written by one shard."""

    counter: str
    dimension: str
    bucket: Bucket
    shard: str

    def key(self, item: ItemId) -> dict[str, Any]:
        return layout.summary_key(self.counter, self.dimension, *item)


def _head(bucket: Bucket) -> ItemId:
    """Part 0 of a bucket's summary: it says the summary's layout."""
    return bucket.resolution, bucket.index, 0


def single_bytes() -> int:
    return min(SINGLE_BYTES, topk.MAX_BYTES)


def targets(countable: Countable) -> list[tuple[Target, str]]:
    """The bucket summaries one event is merged into, with its entry in each (entry_of)."""
    event = countable.event
    return [
        (Target(event.counter, dimension, b, countable.shard), entry_of(event, dimension, b))
        for b in countable.buckets
        for dimension in sorted(event.dimensions)
    ]


def entry_of(event: Event, dimension: str, bucket: Bucket) -> str:
    """An event's entry in its bucket's summary of a dimension."""
    value = event.dimensions[dimension]
    if bucket.resolution == "hour":
        return layout.hour_entry(timebuckets.minute_of(event.time_ms), value)
    return value


def plan(counted: Iterable[Countable]) -> list[tuple[Target, list[Member]]]:
    """The bucket summaries a batch's counted records go to, in key order, each with its members."""
    groups: dict[Target, list[Member]] = {}
    for countable in counted:
        for target, entry in targets(countable):
            groups.setdefault(target, []).append((countable, entry))
    return sorted(groups.items())


def write(dynamodb: DynamoDB, settings: Settings, target: Target, members: list[Member], now_ms: int) -> int:
    """Merge the records of one shard into one bucket's summary, exactly once; returns the calls made."""
    members = sorted(members, key=lambda m: m[0].position)
    return _write_item(dynamodb, settings, target, target.key(_head(target.bucket)), members, now_ms, head=True)


def _write_item(
    dynamodb: DynamoDB,
    settings: Settings,
    target: Target,
    key: dict[str, Any],
    members: list[Member],
    now_ms: int,
    known: dict[str, Any] | None = None,
    head: bool = False,
) -> int:
    """Merge members into one item: the bucket's part 0 (`head`: one item while it fits, else split;
    once split, each item the members touch) or one item of the parts layout (`known`: the item
    as just read, if it was)."""
    calls = 0
    for _ in range(MAX_ROUNDS):
        if known is None:
            stored = _read(dynamodb, settings, key)
            calls += 1
        else:
            stored, known = known, None
        if head and stored is not None and not _single(stored):
            # The parts layout: each part and quarter hour the members touch, one item at a time.
            for item_id, merged in sorted(_by_item(target.bucket, members).items()):
                known = stored if item_id == _head(target.bucket) else None
                calls += _write_item(dynamodb, settings, target, target.key(item_id), merged, now_ms, known)
            return calls
        # The members above the item's stored position of their shard: not in it yet.
        stamp = layout.split_stamped(attributes.text(stored or {}, target.shard, ""))
        later = [m for m in members if m[0].position > stamp.position]
        if not later:
            return calls
        summary = _with(stored, later)
        if head and topk.encoded_size(summary) > single_bytes():
            split, made = _split(dynamodb, settings, target, stored, summary, later, now_ms)
            calls += made
            if split:
                return calls
            continue
        item = _item(settings, key, target, [stored], summary, later, now_ms)
        if head:
            item[layout.LAYOUT] = {"S": layout.SINGLE}
        elif stored is not None and layout.LAYOUT in stored:
            item[layout.LAYOUT] = stored[layout.LAYOUT]
        calls += 1
        if _put(dynamodb, settings, item, stored):
            return calls
    raise StorageError("a breakdown summary kept changing under its writes")


def _read(dynamodb: DynamoDB, settings: Settings, key: dict[str, Any]) -> dict[str, Any] | None:
    return dynamo.get_item(dynamodb, settings.counts_table, key, "could not read a breakdown summary")


def _with(stored: dict[str, Any] | None, later: list[Member]) -> topk.Summary:
    """The stored summary with the members it does not hold yet added, one event each."""
    summary = topk.decode(attributes.text(stored, "e")) if stored is not None and "e" in stored else topk.Summary()
    for countable, entry in later:
        summary.add(entry, 1, countable.event.values)
    return summary


def _put(dynamodb: DynamoDB, settings: Settings, item: dict[str, Any], stored: dict[str, Any] | None) -> bool:
    """PutItem on condition that the item is still the version read; False when it is not."""
    try:
        version = dynamo.stored_version(stored)
        dynamo.put_versioned(dynamodb, settings.counts_table, item, version, "could not write a breakdown summary")
        return True
    except ConditionFailed:
        return False


def _unchanged(stored: dict[str, Any] | None) -> dict[str, Any]:
    return dynamo.versioned_condition(dynamo.stored_version(stored))


def _single(head: dict[str, Any]) -> bool:
    return attributes.optional_text(head, layout.LAYOUT) == layout.SINGLE


def _quarter(index: int, entry: str) -> tuple[ItemId, str]:
    """The quarter-hour item of hour `index` a minute entry goes to, and its entry there."""
    minute, value = layout.split_entry(entry)
    quarter = ("quarter", index * 4 + minute // layout.QUARTER_MINUTES, 0)
    return quarter, layout.hour_entry(minute, value, layout.QUARTER_MINUTES)


def _keys(counter: str, dimension: str, bucket: Bucket) -> list[dict[str, Any]]:
    """Every item of a bucket's summary of a dimension: its parts, then for an hour its quarter hours."""
    quarters = range(4) if bucket.resolution == "hour" else range(0)
    parts = layout.summary_parts(counter, dimension, bucket.resolution, bucket.index)
    return parts + [layout.summary_key(counter, dimension, "quarter", bucket.index * 4 + q, 0) for q in quarters]


def _by_item(bucket: Bucket, members: list[Member]) -> dict[ItemId, list[Member]]:
    """The parts layout's items the members go to, each with their entries there: the part of
    their value and, for an hour, the quarter hour of their minute."""
    items: dict[ItemId, list[Member]] = {}
    for countable, entry in members:
        value = entry
        if bucket.resolution == "hour":
            quarter, in_quarter = _quarter(bucket.index, entry)
            items.setdefault(quarter, []).append((countable, in_quarter))
            value = layout.split_entry(entry)[1]
        part = layout.part_of(value, bucket.resolution)
        items.setdefault((bucket.resolution, bucket.index, part), []).append((countable, value))
    return items


def replay_puts(dynamodb: DynamoDB, settings: Settings, countable: Countable) -> list[dict[str, Any]]:
    """The transaction Puts that add one set-aside event to its summaries (docs/counting.md, "Replay")."""
    puts = []
    for target, entry in targets(countable):
        first = _head(target.bucket)
        head = _read(dynamodb, settings, target.key(first))
        whole = {first: [(countable, entry)]}
        chosen = whole if head is None or _single(head) else _by_item(target.bucket, [(countable, entry)])
        for item_id, members in sorted(chosen.items()):
            key = target.key(item_id)
            stored = head if item_id == first else _read(dynamodb, settings, key)
            retention = max(attributes.integer(stored or {}, "retention", 0), countable.event.retention_seconds)
            kind = layout.SINGLE if stored is None and item_id == first else None
            puts.append(_rewrite(settings, key, stored, _with(stored, members), retention, target.bucket, kind))
    return puts


def _rewrite(
    settings: Settings,
    key: dict[str, Any],
    old: dict[str, Any] | None,
    summary: topk.Summary,
    retention: int,
    ends: Bucket,
    kind: str | None = None,
) -> dict[str, Any]:
    """The transaction Put of `old` rewritten to hold `summary`, its shard positions kept."""
    item = {**(old or {}), **key, **_fields([old], summary, retention, ends)}
    if kind is not None:
        item[layout.LAYOUT] = {"S": kind}
    return {"Put": {"TableName": settings.counts_table, "Item": item, **_unchanged(old)}}


def _pieces(bucket: Bucket, summary: topk.Summary) -> dict[ItemId, topk.Summary]:
    """A bucket's single summary cut into the parts layout's items (by value hash and, for an hour,
    quarter hour), each entry with its count and err, each piece with the floor it was cut from; an
    empty item only where it must carry a floor (part 0 always: it says the layout)."""
    resolution, index, _ = _head(bucket)
    hour = resolution == "hour"
    values = topk.within(summary, 0, 59) if hour else summary
    pieces = {
        (resolution, index, p): topk.Summary(floor=values.floor)
        for p in range(layout.SUMMARY_PARTS if values.floor else 1)
    }
    pieces |= {
        ("quarter", index * 4 + q, 0): topk.Summary(floor=summary.floor)
        for q in range(4 if hour and summary.floor else 0)
    }
    placed = [((resolution, index, layout.part_of(v, resolution)), v, counted) for v, counted in values.entries.items()]
    placed += [(*_quarter(index, entry), counted) for entry, counted in summary.entries.items() if hour]
    for item, entry, counted in placed:
        # Every item is there already when the summary has a floor: one added starts at none.
        piece = pieces.setdefault(item, topk.Summary())
        piece.entries[entry] = topk.Entry(counted.count, counted.err, dict(counted.sums))
    return pieces


def _split(
    dynamodb: DynamoDB,
    settings: Settings,
    target: Target,
    head: dict[str, Any] | None,
    summary: topk.Summary,
    later: list[Member],
    now_ms: int,
) -> tuple[bool, int]:
    """Turn a bucket's single summary (with `later` merged in) into the parts layout, in one
    transaction conditioned on every item being as read; (False, calls) when one was not."""
    pieces = _pieces(target.bucket, summary)
    others = _keys(target.counter, target.dimension, target.bucket)[1:]
    # Items of an earlier split that outlived part 0 (a longer retention): merged in, not overwritten.
    earlier = _read_items(dynamodb, settings, others)
    calls = 1 + (len(others) - 1) // 100
    puts = []
    for item_id, piece in sorted(pieces.items()):
        key = target.key(item_id)
        is_head = item_id == _head(target.bucket)
        stored = head if is_head else earlier.pop(attributes.sort_key(key), None)
        if not is_head and stored is not None and "e" in stored:
            piece = topk.merge(piece, topk.decode(attributes.text(stored, "e")))
        item = _item(settings, key, target, [head] if is_head else [head, stored], piece, later, now_ms)
        if is_head:
            item[layout.LAYOUT] = {"S": "parts"}
        puts.append({"Put": {"TableName": settings.counts_table, "Item": item, **_unchanged(stored)}})
    # An earlier part no piece of this split touches is left as it is: it is one of the parts.
    return transactions.write_items(dynamodb, puts, what="splitting a breakdown summary"), calls + 1


def _item(
    settings: Settings,
    key: dict[str, Any],
    target: Target,
    read: list[dict[str, Any] | None],
    summary: topk.Summary,
    later: list[Member],
    now_ms: int,
) -> dict[str, Any]:
    """An item holding `summary`: the items `read` with `later` merged in, each shard's furthest
    position (another shard's only while a delivery could need it), a version above those read."""
    retention = max(
        [attributes.integer(r or {}, "retention", 0) for r in read] + [c.event.retention_seconds for c, _ in later]
    )
    horizon = now_ms // 1000 - settings.marker_ttl_seconds
    item: dict[str, Any] = {**key, target.shard: {"S": later[-1][0].stamp()}}
    for one in read:
        for name, value in (one or {}).items():
            if not layout.is_shard_attribute(name):
                continue
            stamp = layout.split_stamped(attributes.text(one or {}, name, ""))
            if name != target.shard and stamp.created_s is not None and stamp.created_s < horizon:
                continue  # a shard no delivery can bring back below its position
            if name not in item or layout.split_stamped(attributes.text(item, name)).position < stamp.position:
                item[name] = value
    return item | _fields(read, summary, retention, target.bucket)


def _fields(read: list[dict[str, Any] | None], summary: topk.Summary, retention: int, ends: Bucket) -> dict[str, Any]:
    """An item's attributes besides its key and positions: `summary` (fitted to topk.MAX_BYTES), a
    version above every version read, its retention and expiry, and what it and the items read evicted."""
    evicted = summary.fit() + sum(attributes.integer(r or {}, "evicted", 0) for r in read)
    return {
        "e": {"S": topk.encode(summary)},
        dynamo.VERSION: {"N": str(1 + max(dynamo.stored_version(r) for r in read))},
        "retention": {"N": str(retention)},
        "expires_at": {"N": str(timebuckets.expires_at_s(ends, retention))},
        **({"evicted": {"N": str(evicted)}} if evicted else {}),
    }


def bucket_items(
    dynamodb: DynamoDB, settings: Settings, counter: str, dimension: str, bucket: Bucket
) -> dict[str, dict[str, Any]]:
    """Every stored item of a bucket's summary of a dimension (_keys), by sort key, read consistently."""
    return _read_items(dynamodb, settings, _keys(counter, dimension, bucket))


def _read_items(dynamodb: DynamoDB, settings: Settings, keys: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    found = dynamo.batch_get_items(
        dynamodb, settings.counts_table, keys, "could not read a breakdown summary", consistent=True
    )
    return {attributes.sort_key(item): dict(item) for item in found}


def rebuild(
    dynamodb: DynamoDB,
    settings: Settings,
    counter: str,
    dimension: str,
    bucket: Bucket,
    stored: dict[str, dict[str, Any]],
    events: list[Event],
) -> bool | None:
    """Make a bucket's summary of a dimension exactly the events given, on condition that each item is
    still as `stored`: True written, False already right, None changed since (docs/counting.md, "Repair")."""
    head = stored.get(attributes.sort_key(layout.summary_key(counter, dimension, *_head(bucket))))
    summary = topk.Summary()
    for event in events:
        summary.add(entry_of(event, dimension, bucket), 1, event.values)
    single = (not stored or (head is not None and _single(head))) and topk.encoded_size(summary) <= single_bytes()
    pieces: dict[ItemId, topk.Summary] = {_head(bucket): summary} if single else _pieces(bucket, summary)
    for sk in stored:  # an item the recount leaves empty is emptied
        kept: str = "quarter" if sk.startswith(layout.PREFIX["quarter"]) else bucket.resolution
        index, part = (int(n) for n in sk.split("#")[1:3])
        pieces.setdefault((kept, index, part), topk.Summary())
    kind = layout.SINGLE if single else "parts"
    retention = max(
        [attributes.integer(i, "retention", 0) for i in stored.values()] + [e.retention_seconds for e in events]
    )
    puts: list[dict[str, Any]] = []
    for item_id, piece in sorted(pieces.items()):
        key = layout.summary_key(counter, dimension, *item_id)
        old = stored.get(attributes.sort_key(key))
        is_head = item_id == _head(bucket)
        put = _rewrite(settings, key, old, piece, retention, bucket, kind if is_head else None)
        same = old is not None and put["Put"]["Item"]["e"] == old.get("e")
        if not same or (is_head and attributes.optional_text(old or {}, layout.LAYOUT) != kind):
            puts.append(put)
    if not puts:
        return False
    if len(puts) == 1:
        item = puts[0]["Put"]["Item"]
        return _put(dynamodb, settings, item, stored.get(attributes.sort_key(item))) or None
    return transactions.write_items(dynamodb, puts, what="rebuilding a breakdown summary") or None
