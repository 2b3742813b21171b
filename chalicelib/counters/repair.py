"""`POST /audit/repair`: make a short partition's buckets exact again, by recounting them.
How, and why this is exact under concurrency, retries and crashes: docs/counting.md,
"Repair"."""

from __future__ import annotations

import json
from collections import Counter as Tally
from contextlib import suppress
from dataclasses import dataclass, field, fields
from typing import Any

from chalicelib.core import attributes, dynamo, quarantine, timebuckets, times, transactions
from chalicelib.core.aws import DynamoDB
from chalicelib.core.errors import ValidationError
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import ConditionFailed, translated
from chalicelib.core.timebuckets import Bucket
from chalicelib.counters import audit, audit_items, audit_runs, filters, layout, recounted_sums, summary_writes
from chalicelib.counters.countable import live_buckets
from chalicelib.events import ingest as events_ingest
from chalicelib.events import packs
from chalicelib.events.ingest import Event

REPAIR_ATTEMPTS = 4
# What the stream handler reads of an events item (of either layout).
_FIELDS = (
    *("pk", "sk", "kind", "counter", "id", "id_given", "time", "retention", "ingested_at", "expires_at"),
    *("dimensions", "values", packs.EVENTS, packs.OFFSET),
)
Subset = tuple[tuple[str, str], ...]  # a filter's dimension values, sorted; () for the counter's own buckets
Key = tuple[str, Subset, Bucket]
SummaryKey = tuple[str, str, Bucket]  # a counter's breakdown summary of one dimension in one bucket
EventKey = tuple[str, str, int | None]  # events-table key, and index in its pack (None: one-event item)


@dataclass
class RepairResult:
    partition: str
    buckets: int = 0
    written: int = 0
    unchanged: int = 0
    busy: list[Key] = field(default_factory=list)
    summaries: int = 0
    summaries_written: int = 0
    summaries_unchanged: int = 0
    busy_summaries: list[SummaryKey] = field(default_factory=list)
    partitions_read: int = 0
    events_read: int = 0
    accounted: bool = False  # the partition's audit item now adds up
    finding: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        answer = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "busy_summaries"}
        answer["busy"] = [
            {"counter": c, **({"where": dict(sub)} if sub else {}), "resolution": b.resolution, "start": _iso(b)}
            for c, sub, b in self.busy
        ] + [{"counter": c, "by": d, "resolution": b.resolution, "start": _iso(b)} for c, d, b in self.busy_summaries]
        return answer


def _iso(bucket: Bucket) -> str:
    return times.iso(bucket.start_ms)


@dataclass(frozen=True)
class _Stored:
    """One stored event the recount may use."""

    key: EventKey
    event: Event
    ingested_ms: int

    def keys(self, settings: Settings, at_ms: int) -> tuple[list[Key], list[SummaryKey]]:
        """The buckets the stream handler counts it in (its counter's and its filters', live at
        `at_ms`), and the breakdown summaries it merges it into."""
        event = self.event
        counted = live_buckets(event, at_ms)
        found = filters.subsets(event.dimensions, settings.filter_pairs)
        subsets: list[Subset] = [(), *(tuple(sorted(sub.items())) for sub in found)]
        return (
            [(event.counter, sub, b) for sub in subsets for b in counted],
            [(event.counter, d, b) for d in sorted(event.dimensions) for b in counted],
        )


def repair(dynamodb: DynamoDB, settings: Settings, partition: str, now_ms: int) -> RepairResult:
    result = RepairResult(partition)
    own_all = _events(dynamodb, settings, partition)
    keys = [s.keys(settings, now_ms) for s in own_all if s is not None]
    pending = {k for mine, _ in keys for k in mine}
    waiting = {k for _, theirs in keys for k in theirs}
    result.buckets, result.summaries = len(pending), len(waiting)
    if pending:
        oldest = min(b.start_ms for _, _, b in pending) - settings.max_future_skew_seconds * 1000
        if oldest < now_ms - settings.event_ttl_seconds * 1000:
            raise ValidationError(
                "some buckets of this partition's events start before the oldest events the events table "
                "keeps (EVENT_TTL_SECONDS): they cannot be recounted"
            )
    for _ in range(REPAIR_ATTEMPTS):
        if not pending and not waiting:
            break
        pending, waiting = _attempt(dynamodb, settings, partition, pending, waiting, now_ms, result)
    result.busy, result.busy_summaries = sorted(pending), sorted(waiting)
    if not pending and not waiting:
        result.accounted = _account(dynamodb, settings, partition, len(own_all), now_ms)
        result.finding = audit_runs.recheck(dynamodb, settings, partition, now_ms).as_dict()
    return result


def _attempt(
    dynamodb: DynamoDB,
    settings: Settings,
    partition: str,
    pending: set[Key],
    waiting: set[SummaryKey],
    now_ms: int,
    result: RepairResult,
) -> tuple[set[Key], set[SummaryKey]]:
    """One pass: read the buckets and their summaries, recount them, write them; the keys still to do."""
    stored = {key: _read_bucket(dynamodb, settings, key) for key in pending}
    # An hour's first events of a quiet day may be held inline by its day item (layout.hour_inline):
    # the hour item holds the others.
    days = {
        key: _read_bucket(dynamodb, settings, (key[0], key[1], Bucket("day", timebuckets.day_of_hour(key[2].index))))
        for key in pending
        if key[2].resolution == "hour"
    }
    # A summary is read before the partitions too, and written on condition that it is as read.
    heads = {key: summary_writes.bucket_items(dynamodb, settings, *key) for key in waiting}
    lost = _lost_partitions(dynamodb, settings, now_ms) | {partition}
    wanted = pending | waiting
    oldest = min(b.start_ms for _, _, b in wanted) - settings.max_future_skew_seconds * 1000
    # The events each bucket or summary counts, in the order read: a client id once (its marker
    # counted it once).
    counts: dict[Key | SummaryKey, dict[object, Event]] = {key: {} for key in wanted}
    busy: set[Key | SummaryKey] = set()
    quarantined: set[EventKey] | None = None
    for quarter in range(oldest - oldest % audit.QUARTER_MS, now_ms + 1, audit.QUARTER_MS):
        for pk in audit.partitions(quarter, settings.event_write_shards):
            items = _events(dynamodb, settings, pk)
            result.partitions_read += 1
            result.events_read += len(items)
            found = [
                (s, k)
                for s in items
                if s is not None
                for keys in s.keys(settings, s.ingested_ms)
                for k in keys
                if k in wanted
            ]
            if not found:
                continue
            tally = audit_runs.accounted(dynamodb, settings, pk)
            if pk not in lost and sum(tally.values()) < len(items):
                busy |= {k for _, k in found}  # records of it are still on their way
                continue
            if tally[audit_items.SET_ASIDE] and quarantined is None:
                quarantined = _quarantined_keys(dynamodb, settings)
            for s, key in found:
                if not (quarantined and s.key in quarantined):  # set aside: not counted until replayed
                    counts[key].setdefault((s.event.counter, s.event.id) if s.event.id_given else s.key, s.event)
    # Each write's outcome: True written, False already right, None written to meanwhile (read and recount again).
    buckets = {
        key: _write_bucket(dynamodb, settings, key, stored[key], list(counts[key].values()), days.get(key))
        for key in pending.difference(busy)
    }
    summaries = {
        key: summary_writes.rebuild(dynamodb, settings, *key, heads[key], list(counts[key].values()))
        for key in waiting.difference(busy)
    }
    result.written += [*buckets.values()].count(True)
    result.unchanged += [*buckets.values()].count(False)
    result.summaries_written += [*summaries.values()].count(True)
    result.summaries_unchanged += [*summaries.values()].count(False)
    left = pending & busy | {key for key, outcome in buckets.items() if outcome is None}
    return left, waiting & busy | {key for key, outcome in summaries.items() if outcome is None}


def _item_key(key: Key) -> dict[str, Any]:
    counter, sub, bucket = key
    return layout.bucket_item_key(filters.read_pk(counter, dict(sub)), bucket)


def _events(dynamodb: DynamoDB, settings: Settings, pk: str) -> list[_Stored | None]:
    """The events stored under one events partition as the stream handler reads them: each event of a
    pack or of a one-event item, None for each it would set aside (a pack it cannot read is one)."""
    names = {f"#f{i}": name for i, name in enumerate(_FIELDS)}
    request = dynamo.query_request(settings.events_table, pk, consistent=True, projection=", ".join(names), names=names)
    return [
        parsed
        for raw in dynamo.query_items(dynamodb, request, "could not read an events partition")
        for parsed in _parse(raw)
    ]


def _parse(raw: dict[str, Any]) -> list[_Stored | None]:
    try:
        item = attributes.deserialized(raw)
        if item.get("kind") not in packs.KINDS:
            return []
        unpacked = packs.unpack(item)
    except (TypeError, ValueError):  # packs.PackFormatError is a ValueError
        return [None]
    return [_stored(event, index) for index, event in unpacked]


def _stored(item: dict[str, Any], index: int | None) -> _Stored | None:
    with suppress(ValidationError, ValueError, TypeError):
        event = events_ingest.from_item(item)
        return _Stored((item["pk"], item["sk"], index), event, int(item.get("ingested_at", 0)))
    return None


def _lost_partitions(dynamodb: DynamoDB, settings: Settings, now_ms: int) -> set[str]:
    """Partitions the audit lists as short: their missing events are taken as lost."""
    pk, live_at_s = audit_runs.FINDINGS_PK, now_ms // 1000
    request = dynamo.query_request(settings.counts_table, pk, consistent=True, live_at_s=live_at_s)
    findings = dynamo.query_items(dynamodb, request, "could not read the audit findings")
    return {attributes.sort_key(i) for i in findings if attributes.integer(i, "shortfall", 0) > 0}


def _quarantined_keys(dynamodb: DynamoDB, settings: Settings) -> set[EventKey]:
    """Events-table keys of the stream records set aside (their stored copies name them)."""
    pk = quarantine.partition_key(quarantine.EVENTS_STREAM)
    request = dynamo.query_request(settings.counts_table, pk, projection="#r", names={"#r": "record"})
    keys: set[EventKey] = set()
    for item in dynamo.query_items(dynamodb, request, "could not read the quarantine"):
        with suppress(ValueError, KeyError, TypeError):  # a copy cut short: it names no key
            ddb = json.loads(attributes.text(item, "record"))["dynamodb"]
            image = ddb.get("NewImage") or {}
            # A pack's event keeps its record narrowed to it: `o` is its index in the pack.
            is_pack = attributes.optional_text(image, "kind") == packs.PACK_KIND
            keys.add((*attributes.key_of(ddb["Keys"]), attributes.integer(image, packs.OFFSET) if is_pack else None))
    return keys


def _read_bucket(dynamodb: DynamoDB, settings: Settings, key: Key) -> dict[str, Any] | None:
    return dynamo.get_item(dynamodb, settings.counts_table, _item_key(key), "could not read a counter bucket")


def _write_bucket(
    dynamodb: DynamoDB,
    settings: Settings,
    key: Key,
    stored: dict[str, Any] | None,
    events: list[Event],
    day: dict[str, Any] | None,
) -> bool | None:
    """Write the recount, counts and sums, if the bucket is as read (and, for an hour, its day's
    inline minutes): True written, False already right, None changed since it was read."""
    bucket = key[2]
    # Every event the bucket counts, in the order read (a day's inline minutes carry no values:
    # an event with values is never held inline, bucket_writes._day_mode).
    sums = recounted_sums.change(stored, recounted_sums.recount(stored, bucket, events))
    n, minutes = len(events), Tally[int]()
    if bucket.resolution == "hour":
        # Less the events its day item holds inline; None if it holds more than the recount (it
        # changed since it was read, or its events are not all accounted yet).
        inline = layout.hour_inline(day, bucket)
        minutes.update(timebuckets.minute_of_hour(e.time_ms) for e in events)
        minutes.subtract(inline)
        if any(k < 0 for k in minutes.values()):
            return None
        n, minutes = n - sum(inline.values()), +minutes
    old = stored or {}
    old_minutes = {m: attributes.integer(old, a) for m in range(60) if (a := layout.minute_attribute(m)) in old}
    if attributes.integer(old, "n", 0) == n and old_minutes == dict(minutes) and not sums:
        return False
    first = _Clauses()
    first.add("n", "n", {"N": str(n)})
    for minute in sorted(set(minutes) | set(old_minutes)):
        value = {"N": str(minutes[minute])} if minute in minutes else None
        first.add(f"m{minute}", layout.minute_attribute(minute), value)
    if stored is None:
        # A new bucket lives as the stream handler would have made it live.
        retention = max((e.retention_seconds for e in events), default=0)
        first.add("r", "retention", {"N": str(retention)})
        first.add("exp", "expires_at", {"N": str(timebuckets.expires_at_s(bucket, retention))})
        condition = "attribute_not_exists(pk)"
    else:
        first.values[":old"] = stored["n"]
        condition = "#n = :old"
    later = _with_sums(first, sums)
    update = {"TableName": settings.counts_table, "Key": _item_key(key), **first.request(condition)}
    if bucket.resolution == "hour" and day is not None and layout.INLINE_COUNT in day:
        # The day's inline minutes were subtracted: they must be as read when the hour is written.
        check = {
            "TableName": settings.counts_table,
            "Key": {"pk": day["pk"], "sk": day["sk"]},
            "ConditionExpression": "#ic = :ic",
            "ExpressionAttributeNames": {"#ic": layout.INLINE_COUNT},
            "ExpressionAttributeValues": {":ic": day[layout.INLINE_COUNT]},
        }
        if not transactions.write_items(
            dynamodb, [{"Update": update}, {"ConditionCheck": check}], what="writing a recounted hour"
        ):
            return None  # the hour's bucket or its day changed since read
    elif not _updated(dynamodb, "could not write a recounted bucket", update):
        return None
    for rest in later:
        # The sums that did not fit the first update's expression, on condition that nothing
        # counted since: docs/counting.md, "Repair" (Sums).
        rest.names["#n"], rest.values[":n"] = "n", {"N": str(n)}
        request = {"TableName": settings.counts_table, "Key": _item_key(key), **rest.request("#n = :n")}
        if not _updated(dynamodb, "could not write a recounted bucket's sums", request):
            return None
    return True


def _updated(dynamodb: DynamoDB, failure: str, request: dict[str, Any]) -> bool:
    """Send one UpdateItem: False when its condition failed."""
    with suppress(ConditionFailed), translated(failure):
        dynamodb.update_item(**request)
        return True
    return False


# A recount's sums past these in one update go in further updates: DynamoDB's 4 KB and moto's
# recursion (docs/guarantees.md, "Expressions are at most 4 KB").
EXPRESSION_CHARS = 3_500
EXPRESSION_CLAUSES = 100


@dataclass
class _Clauses:
    """One UpdateItem's SET and REMOVE clauses with their placeholders."""

    names: dict[str, str] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    sets: list[str] = field(default_factory=list)
    removes: list[str] = field(default_factory=list)

    def add(self, tag: str, attribute: str, value: dict[str, Any] | None) -> None:
        """SET `attribute` to `value`, or REMOVE it (None), by the placeholders #tag and :tag."""
        self.names[f"#{tag}"] = attribute
        if value is None:
            self.removes.append(f"#{tag}")
        else:
            self.values[f":{tag}"] = value
            self.sets.append(f"#{tag} = :{tag}")

    def expression(self) -> str:
        parts = ["SET " + ", ".join(self.sets)] if self.sets else []
        return " ".join(parts + (["REMOVE " + ", ".join(self.removes)] if self.removes else []))

    def request(self, condition: str) -> dict[str, Any]:
        return {
            "UpdateExpression": self.expression(),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": self.names,
            "ExpressionAttributeValues": self.values,
        }


def _with_sums(first: _Clauses, sums: recounted_sums.SumsChange) -> list[_Clauses]:
    """The sums' clauses added to `first` while its expression stays within EXPRESSION_CHARS and
    EXPRESSION_CLAUSES; the rest as further updates' clauses, within the same."""
    changes: list[tuple[str, dict[str, Any] | None]] = [*sums.sets.items(), *((a, None) for a in sums.removes)]
    later: list[_Clauses] = []
    target, chars = first, len(first.expression())
    for i, (attribute, value) in enumerate(changes):
        clause = f"#s{i} = :s{i}" if value is not None else f"#s{i}"
        full = len(target.sets) + len(target.removes) >= EXPRESSION_CLAUSES
        if full or chars + len(clause) + len(" REMOVE ") > EXPRESSION_CHARS:
            target = _Clauses()
            later.append(target)
            chars = len("SET REMOVE ")
        chars += len(clause) + 2
        target.add(f"s{i}", attribute, value)
    return later


def _account(dynamodb: DynamoDB, settings: Settings, partition: str, stored: int, now_ms: int) -> bool:
    """Set the partition's `repaired` to what makes it add up (docs/counting.md, "Repair")."""
    carrying = [
        i
        for i in audit_runs.read_group(dynamodb, settings, partition)
        if attributes.sort_key(i) != audit_items.REPAIRS_SORT_KEY
        and any(audit_items.attribute(a, partition) in i for a in audit_items.ACCOUNTS)
    ]
    others = audit_items.group_accounts(carrying, partition)
    table = settings.counts_table
    update = {
        "TableName": table,
        "Key": audit_items.repairs_key(partition),
        "UpdateExpression": "SET #rep = :rep, expires_at = if_not_exists(expires_at, :exp)",
        "ExpressionAttributeNames": {"#rep": audit_items.attribute(audit_items.REPAIRED, partition)},
        "ExpressionAttributeValues": {
            ":rep": {"N": str(stored - audit_items.accounted(others))},
            ":exp": {"N": str(now_ms // 1000 + audit_items.AUDIT_TALLY_TTL_SECONDS)},
        },
    }
    items = [{"Update": update}, *(_as_read(table, item, partition) for item in carrying)]
    if len(items) > transactions.MAX_ITEMS:
        return False  # more stream shards than one transaction can check: the next run will say
    # False: the stream counted some of it meanwhile; the audit's next run will say.
    return transactions.write_items(dynamodb, items, what="recording a repair", attempts=5)


def _as_read(table: str, item: dict[str, Any], partition: str) -> dict[str, Any]:
    """A ConditionCheck that the stream's numbers of the partition on an audit item are as read."""
    names = {f"#a{i}": audit_items.attribute(a, partition) for i, a in enumerate(audit_items.STREAM_ACCOUNTS)}
    values = {f":{p[1:]}": item[name] for p, name in names.items() if name in item}
    parts = [f"{p} = :{p[1:]}" if name in item else f"attribute_not_exists({p})" for p, name in names.items()]
    check = {
        "TableName": table,
        "Key": {"pk": item["pk"], "sk": item["sk"]},
        "ConditionExpression": " AND ".join(parts),
        "ExpressionAttributeNames": names,
    }
    return {"ConditionCheck": check | ({"ExpressionAttributeValues": values} if values else {})}
