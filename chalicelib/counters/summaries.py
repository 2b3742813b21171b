"""Writing breakdown summaries from a stream batch, exactly once, under the per-shard proof.

A summary item (`TOP#<counter>#<dimension>` / `<m|h|d>#<index>#<part>`, counters/topk.py) is
rewritten whole: its entries are evicted by size, which no ADD can express. So each item of a
batch is one consistent GetItem and one conditional PutItem:

- the item carries, like every bucket item, the position of each stream shard that wrote to it
  (`s:<shard hash>`); the records of this batch at or below the stored position of their shard
  are already in it and are left out, the later ones are merged in;
- the PutItem is conditioned on the version read (`ver`), so nothing written between the read
  and the write is lost; a failed condition reads again.

So a redelivered batch adds nothing, a handler dying between two items leaves each item exactly
at the records it holds, and the redelivery completes the rest, exactly as for counts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chalicelib.core import attributes, timebuckets
from chalicelib.core.aws import DynamoDB
from chalicelib.core.errors import StorageError
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import ConditionFailed, translated
from chalicelib.core.timebuckets import Bucket
from chalicelib.counters import dimension_keys, topk
from chalicelib.counters import keys as counter_keys

if TYPE_CHECKING:
    from chalicelib.counters.stream_apply import Countable

CONDITION_FAILED = "ConditionalCheckFailedException"
MAX_ROUNDS = 8


@dataclass(frozen=True, order=True)
class Target:
    counter: str
    dimension: str
    resolution: str
    index: int
    part: int
    shard: str
    ends: Bucket  # the counter bucket whose end and retention the summary is kept by


def targets(countable: Countable) -> list[tuple[Target, str]]:
    """The summary items one event is merged into, with its entry in each: its value of the
    dimension (hours, days), or the minute and the value (quarter hours)."""
    found = []
    event = countable.event
    for bucket in countable.buckets:
        minute = timebuckets.minute_of(event.time_ms)
        for dimension, value in sorted(event.dimensions.items()):
            part = dimension_keys.part_of(value, bucket.resolution)
            found.append(
                (
                    Target(event.counter, dimension, bucket.resolution, bucket.index, part, countable.shard, bucket),
                    value,
                )
            )
            if bucket.resolution == "hour":
                quarter = minute // dimension_keys.QUARTER_MINUTES
                entry = dimension_keys.quarter_entry(minute, value)
                found.append((Target(event.counter, dimension, "quarter", quarter, 0, countable.shard, bucket), entry))
    return found


def plan(counted: Iterable[Countable]) -> list[tuple[Target, list[tuple[Countable, str]]]]:
    """The summary items a batch's counted records go to, in key order, each with its records
    and their entries."""
    groups: dict[Target, list[tuple[Countable, str]]] = {}
    for countable in counted:
        for target, value in targets(countable):
            groups.setdefault(target, []).append((countable, value))
    return sorted(groups.items())


def write(
    dynamodb: DynamoDB, settings: Settings, target: Target, members: list[tuple[Countable, str]], now_ms: int
) -> int:
    """Merge the records of one shard into one summary item, exactly once; returns the calls made."""
    calls = 0
    key = dimension_keys.summary_key(target.counter, target.dimension, target.resolution, target.index, target.part)
    members = sorted(members, key=lambda m: m[0].position)
    for _ in range(MAX_ROUNDS):
        calls += 1
        with translated("could not read a breakdown summary"):
            stored = dynamodb.get_item(TableName=settings.counts_table, Key=key, ConsistentRead=True).get("Item")
        stamp = counter_keys.split_stamped(attributes.text(stored or {}, target.shard, ""))
        later = [m for m in members if m[0].position > stamp.position]
        if not later:
            return calls
        item = _merged(settings, key, target, stored, later, now_ms)
        request: dict[str, Any] = {"TableName": settings.counts_table, "Item": item}
        if stored is None:
            request["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            request["ConditionExpression"] = "ver = :ver"
            request["ExpressionAttributeValues"] = {":ver": stored["ver"]}
        try:
            calls += 1
            with translated("could not write a breakdown summary"):
                dynamodb.put_item(**request)
            return calls
        except ConditionFailed:
            pass
    raise StorageError("a breakdown summary kept changing under its writes")


def _merged(
    settings: Settings,
    key: dict[str, Any],
    target: Target,
    stored: dict[str, Any] | None,
    later: list[tuple[Countable, str]],
    now_ms: int,
) -> dict[str, Any]:
    old = stored or {}
    summary = topk.decode(attributes.text(old, "e")) if "e" in old else topk.Summary()
    for countable, value in later:
        summary.add(value, 1, countable.event.values)
    evicted = summary.fit()
    stored_retention = attributes.integer(old, "retention", 0)
    retention = max([stored_retention] + [c.event.retention_seconds for c, _ in later])
    horizon = now_ms // 1000 - settings.marker_ttl_seconds
    item: dict[str, Any] = dict(key)
    for name, value in old.items():
        if counter_keys.is_shard_attribute(name) and name != target.shard:
            created = counter_keys.split_stamped(attributes.text(old, name, "")).created_s
            if created is None or created >= horizon:
                item[name] = value  # other shards' positions, while a delivery could still need them
    last = later[-1][0]
    created_s = int(last.record.created_s) if last.record.created_s is not None else 0
    item[target.shard] = {"S": counter_keys.stamped_position(last.position, created_s)}
    item["e"] = {"S": topk.encode(summary)}
    item["ver"] = {"N": str(attributes.integer(old, "ver", 0) + 1)}
    item["retention"] = {"N": str(retention)}
    item["expires_at"] = {"N": str(timebuckets.expires_at_s(target.ends, retention))}
    if evicted:
        item["evicted"] = {"N": str(attributes.integer(old, "evicted", 0) + evicted)}
    elif "evicted" in old:
        item["evicted"] = old["evicted"]
    return item
