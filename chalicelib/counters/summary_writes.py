"""The breakdown summary writes: a shard's records merged into a bucket's summary, exactly once;
also the replay's puts of one event and the repair's rebuild. Why this is exact:
docs/counting.md, "The proof for summaries" and "Breakdowns"; docs/guarantees.md, "Read, then
write on condition"."""

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
# The most bytes of entries a bucket's summary keeps in one item before it is split: a write of
# it costs at most 4 write units (an UpdateItem/PutItem is priced per started KB of the item).
SINGLE_BYTES = 3_500

Member = tuple[Countable, str]  # a record and its entry: the value (days), minute and value (hours)


@dataclass(frozen=True, order=True)
class Target:
    """The summary of one counter's dimension in one bucket, as written by one shard."""

    counter: str
    dimension: str
    resolution: str  # "hour" or "day"
    index: int
    shard: str
    ends: Bucket  # the counter bucket whose end and retention the summary is kept by

    def key(self, part: int, resolution: str | None = None, index: int | None = None) -> dict[str, Any]:
        return layout.summary_key(
            self.counter, self.dimension, resolution or self.resolution, self.index if index is None else index, part
        )


def single_bytes() -> int:
    return min(SINGLE_BYTES, topk.MAX_BYTES)


def targets(countable: Countable) -> list[tuple[Target, str]]:
    """The bucket summaries one event is merged into, with its entry in each: its value of the
    dimension (days), or the minute of the hour and the value (hours)."""
    found = []
    event = countable.event
    for bucket in countable.buckets:
        for dimension in sorted(event.dimensions):
            target = Target(event.counter, dimension, bucket.resolution, bucket.index, countable.shard, bucket)
            found.append((target, entry_of(event, dimension, bucket)))
    return found


def entry_of(event: Event, dimension: str, bucket: Bucket) -> str:
    """An event's entry in its bucket's summary of a dimension."""
    value = event.dimensions[dimension]
    if bucket.resolution == "hour":
        return layout.hour_entry(timebuckets.minute_of(event.time_ms), value)
    return value


def plan(counted: Iterable[Countable]) -> list[tuple[Target, list[Member]]]:
    """The bucket summaries a batch's counted records go to, in key order, each with its records
    and their entries."""
    groups: dict[Target, list[Member]] = {}
    for countable in counted:
        for target, entry in targets(countable):
            groups.setdefault(target, []).append((countable, entry))
    return sorted(groups.items())


def write(dynamodb: DynamoDB, settings: Settings, target: Target, members: list[Member], now_ms: int) -> int:
    """Merge the records of one shard into one bucket's summary, exactly once; returns the calls made."""
    calls = 0
    members = sorted(members, key=lambda m: m[0].position)
    head = target.key(0)
    for _ in range(MAX_ROUNDS):
        stored = _read(dynamodb, settings, head)
        calls += 1
        if stored is not None and attributes.optional_text(stored, layout.LAYOUT) != layout.SINGLE:
            return calls + _write_parts(dynamodb, settings, target, members, now_ms, stored)
        later = _later(stored, target.shard, members)
        if not later:
            return calls
        summary = _with(stored, later)
        if topk.encoded_size(summary) <= single_bytes():
            item = _item(settings, head, target, [stored], summary, later, now_ms)
            item[layout.LAYOUT] = {"S": layout.SINGLE}
            calls += 1
            if _put(dynamodb, settings, item, stored):
                return calls
            continue
        split, made = _split(dynamodb, settings, target, stored, summary, later, now_ms)
        calls += made
        if split:
            return calls
    raise StorageError("a breakdown summary kept changing under its writes")


def _read(dynamodb: DynamoDB, settings: Settings, key: dict[str, Any]) -> dict[str, Any] | None:
    return dynamo.get_item(dynamodb, settings.counts_table, key, "could not read a breakdown summary")


def _later(stored: dict[str, Any] | None, shard: str, members: list[Member]) -> list[Member]:
    """The members above the item's stored position of their shard: not in it yet."""
    stamp = layout.split_stamped(attributes.text(stored or {}, shard, ""))
    return [m for m in members if m[0].position > stamp.position]


def _decoded(stored: dict[str, Any] | None) -> topk.Summary:
    return topk.decode(attributes.text(stored, "e")) if stored is not None and "e" in stored else topk.Summary()


def _with(stored: dict[str, Any] | None, later: list[Member]) -> topk.Summary:
    """The stored summary with the members it does not hold yet added, one event each."""
    summary = _decoded(stored)
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


def _by_item(target: Target, members: list[Member]) -> dict[tuple[str, int, int], list[Member]]:
    """The parts layout's items the members go to, each with their entries there: the part of
    their value and, for an hour, the quarter hour of their minute."""
    items: dict[tuple[str, int, int], list[Member]] = {}
    for countable, entry in members:
        if target.resolution == "hour":
            minute, value = layout.split_quarter_entry(entry)
            quarter = target.index * 4 + minute // layout.QUARTER_MINUTES
            items.setdefault(("quarter", quarter, 0), []).append((countable, layout.quarter_entry(minute, value)))
        else:
            value = entry
        part = layout.part_of(value, target.resolution)
        items.setdefault((target.resolution, target.index, part), []).append((countable, value))
    return items


def _write_parts(
    dynamodb: DynamoDB,
    settings: Settings,
    target: Target,
    members: list[Member],
    now_ms: int,
    head: dict[str, Any],
) -> int:
    """The parts layout: each part and quarter hour the members touch, one item at a time."""
    calls = 0
    for (resolution, index, part), merged in sorted(_by_item(target, members).items()):
        key = target.key(part, resolution, index)
        known = head if (resolution, part) == (target.resolution, 0) else None
        calls += _write_item(dynamodb, settings, target, key, merged, now_ms, known)
    return calls


def replay_puts(dynamodb: DynamoDB, settings: Settings, countable: Countable) -> list[dict[str, Any]]:
    """The transaction Puts that add one set-aside event to its summaries, on condition of the
    version read (docs/counting.md, "Replay")."""
    puts = []
    for target, entry in targets(countable):
        head = _read(dynamodb, settings, target.key(0))
        single = head is None or attributes.optional_text(head, layout.LAYOUT) == layout.SINGLE
        chosen = (
            {(target.resolution, target.index, 0): [(countable, entry)]}
            if single
            else _by_item(target, [(countable, entry)])
        )
        for (resolution, index, part), members in sorted(chosen.items()):
            key = target.key(part, resolution, index)
            stored = head if (resolution, part) == (target.resolution, 0) else _read(dynamodb, settings, key)
            summary = _decoded(stored)
            for _, added in members:
                summary.add(added, 1, countable.event.values)
            retention = max(attributes.integer(stored or {}, "retention", 0), countable.event.retention_seconds)
            new_head = stored is None and (resolution, part) == (target.resolution, 0)
            puts.append(
                _rewrite(settings, key, stored, summary, retention, target.ends, layout.SINGLE if new_head else None)
            )
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
    """The transaction Put of `old` rewritten to hold `summary`, one version up, its shard positions
    kept."""
    evicted = summary.fit()
    item = {
        **(old or {}),
        **key,
        "e": {"S": topk.encode(summary)},
        dynamo.VERSION: {"N": str(dynamo.stored_version(old) + 1)},
        "retention": {"N": str(retention)},
        "expires_at": {"N": str(timebuckets.expires_at_s(ends, retention))},
    }
    if kind is not None:
        item[layout.LAYOUT] = {"S": kind}
    if evicted:
        item["evicted"] = {"N": str(attributes.integer(old or {}, "evicted", 0) + evicted)}
    return {"Put": {"TableName": settings.counts_table, "Item": item, **_unchanged(old)}}


def _write_item(
    dynamodb: DynamoDB,
    settings: Settings,
    target: Target,
    key: dict[str, Any],
    members: list[Member],
    now_ms: int,
    known: dict[str, Any] | None,
) -> int:
    """Merge members into one item of the parts layout (`known`: the item as just read, if it was)."""
    calls = 0
    for _ in range(MAX_ROUNDS):
        if known is None:
            stored = _read(dynamodb, settings, key)
            calls += 1
        else:
            stored, known = known, None
        later = _later(stored, target.shard, members)
        if not later:
            return calls
        summary = _with(stored, later)
        evicted = summary.fit()
        item = _item(settings, key, target, [stored], summary, later, now_ms, evicted)
        if stored is not None and layout.LAYOUT in stored:
            item[layout.LAYOUT] = stored[layout.LAYOUT]
        calls += 1
        if _put(dynamodb, settings, item, stored):
            return calls
    raise StorageError("a breakdown summary kept changing under its writes")


def _pieces(resolution: str, index: int, summary: topk.Summary) -> dict[tuple[str, int, int], topk.Summary]:
    """A bucket's single summary cut into the parts layout's items (by value hash and, for an hour,
    quarter hour), each entry with its count and err, each piece with the floor it was cut from; an
    empty item only where it must carry a floor (part 0 always: it says the layout)."""
    hour = resolution == "hour"
    values = topk.within(summary, 0, 59) if hour else summary
    pieces: dict[tuple[str, int, int], topk.Summary] = {
        (resolution, index, p): topk.Summary(floor=values.floor)
        for p in range(layout.SUMMARY_PARTS if values.floor else 1)
    }
    for value, counted in values.entries.items():
        part = layout.part_of(value, resolution)
        piece = pieces.setdefault((resolution, index, part), topk.Summary(floor=values.floor))
        piece.entries[value] = topk.Entry(counted.count, counted.err, dict(counted.sums))
    for q in range(4 if hour and summary.floor else 0):
        pieces[("quarter", index * 4 + q, 0)] = topk.Summary(floor=summary.floor)
    for entry, counted in summary.entries.items() if hour else ():
        minute, value = layout.split_quarter_entry(entry)
        quarter = index * 4 + minute // layout.QUARTER_MINUTES
        piece = pieces.setdefault(("quarter", quarter, 0), topk.Summary(floor=summary.floor))
        piece.entries[layout.quarter_entry(minute, value)] = topk.Entry(counted.count, counted.err, dict(counted.sums))
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
    pieces = _pieces(target.resolution, target.index, summary)
    others = [target.key(0, "quarter", target.index * 4 + q) for q in range(4)] if target.resolution == "hour" else []
    others += [target.key(p) for p in range(1, layout.SUMMARY_PARTS)]
    # Items of an earlier split that outlived part 0 (a longer retention): merged in, not overwritten.
    earlier = {
        attributes.sort_key(item): item
        for item in dynamo.batch_get_items(
            dynamodb, settings.counts_table, others, "could not read a breakdown summary", consistent=True
        )
    }
    calls = 1 + (len(others) - 1) // 100
    puts = []
    for (resolution, index, part), piece in sorted(pieces.items()):
        key = target.key(part, resolution, index)
        stored = head if (resolution, part) == (target.resolution, 0) else earlier.pop(attributes.sort_key(key), None)
        if stored is not None and stored is not head and "e" in stored:
            piece = topk.merge(piece, topk.decode(attributes.text(stored, "e")))
        evicted = piece.fit()
        read = [head] if stored is head else [head, stored]
        item = _item(settings, key, target, read, piece, later, now_ms, evicted)
        if (resolution, part) == (target.resolution, 0):
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
    evicted: int = 0,
) -> dict[str, Any]:
    """An item holding `summary`: the items `read` with `later` merged in, each shard's furthest
    position (another shard's only while a delivery could need it), a version above every version
    read (docs/counting.md, "The proof for summaries")."""
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
    item["e"] = {"S": topk.encode(summary)}
    item[dynamo.VERSION] = {"N": str(1 + max(dynamo.stored_version(r) for r in read))}
    item["retention"] = {"N": str(retention)}
    item["expires_at"] = {"N": str(timebuckets.expires_at_s(target.ends, retention))}
    evicted_before = sum(attributes.integer(r or {}, "evicted", 0) for r in read)
    if evicted or evicted_before:
        item["evicted"] = {"N": str(evicted_before + evicted)}
    return item


# Outcomes of a recount's rewrite of a bucket's summary (rebuild).
REBUILT, UNCHANGED, CHANGED = "rebuilt", "unchanged", "changed"


def bucket_items(
    dynamodb: DynamoDB, settings: Settings, counter: str, dimension: str, bucket: Bucket
) -> dict[str, dict[str, Any]]:
    """Every stored item of a bucket's summary of a dimension (its parts and, for an hour, its
    quarter hours), by sort key, read consistently."""
    keys = [
        layout.summary_key(counter, dimension, bucket.resolution, bucket.index, p)
        for p in range(layout.PARTS[bucket.resolution])
    ]
    if bucket.resolution == "hour":
        keys += [layout.summary_key(counter, dimension, "quarter", bucket.index * 4 + q, 0) for q in range(4)]
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
) -> str:
    """Make a bucket's summary of a dimension exactly the events given, on condition that each
    item is still as `stored`: REBUILT, UNCHANGED or CHANGED (docs/counting.md, "Repair")."""

    def key_of(resolution: str, index: int, part: int) -> dict[str, Any]:
        return layout.summary_key(counter, dimension, resolution, index, part)

    head = stored.get(attributes.sort_key(key_of(bucket.resolution, bucket.index, 0)))
    summary = topk.Summary()
    for event in events:
        summary.add(entry_of(event, dimension, bucket), 1, event.values)
    single = (not stored or (head is not None and attributes.optional_text(head, layout.LAYOUT) == layout.SINGLE)) and (
        topk.encoded_size(summary) <= single_bytes()
    )
    pieces: dict[tuple[str, int, int], topk.Summary] = (
        {(bucket.resolution, bucket.index, 0): summary} if single else _pieces(bucket.resolution, bucket.index, summary)
    )
    for sk in stored:  # an item the recount leaves empty is emptied
        kept: str = "quarter" if sk.startswith(layout.SUMMARY_PREFIX["quarter"]) else bucket.resolution
        index, part = (int(n) for n in sk.split("#")[1:3])
        pieces.setdefault((kept, index, part), topk.Summary())
    kind = layout.SINGLE if single else "parts"
    retention = max(
        [attributes.integer(i, "retention", 0) for i in stored.values()] + [e.retention_seconds for e in events]
    )
    puts: list[dict[str, Any]] = []
    for (resolution, index, part), piece in sorted(pieces.items()):
        key = key_of(resolution, index, part)
        old = stored.get(attributes.sort_key(key))
        is_head = (resolution, part) == (bucket.resolution, 0)
        put = _rewrite(settings, key, old, piece, retention, bucket, kind if is_head else None)
        same = old is not None and put["Put"]["Item"]["e"] == old.get("e")
        if same and (not is_head or attributes.optional_text(old or {}, layout.LAYOUT) == kind):
            continue
        puts.append(put)
    if not puts:
        return UNCHANGED
    if len(puts) == 1:
        put = puts[0]["Put"]
        return (
            REBUILT if _put(dynamodb, settings, put["Item"], stored.get(attributes.sort_key(put["Item"]))) else CHANGED
        )
    return REBUILT if transactions.write_items(dynamodb, puts, what="rebuilding a breakdown summary") else CHANGED
