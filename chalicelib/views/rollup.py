"""A URL's ranged counts: the pending minutes on its counter moved into its hour, day and block
items, and the reads of counter and buckets together. Why: docs/design.md, "Exactly once";
docs/guarantees.md, "Pending view minutes move into buckets in one transaction"."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chalicelib.core import attributes, dynamo, timebuckets, transactions
from chalicelib.core.aws import DynamoDB
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import StorageError
from chalicelib.core.settings import Settings
from chalicelib.core.timebuckets import Bucket
from chalicelib.views import layout as view_layout
from chalicelib.views import windows

FLUSH_AT = 48  # pending minutes a counter may hold before a move (docs/design.md, "Exactly once")
MOVE_ITEMS = 100  # one transaction: the counter and the buckets of the minutes moved
MOVE_MINUTES = 64  # pending minutes one move takes, the earliest first
MAX_MOVES = 4  # moves of one counter per batch (a later batch moves what is left)
MAX_READS = 4  # reads of a URL whose buckets keep moving under it before giving up


def total(item: dict[str, Any] | None) -> int:
    """A bucket item's views, at every level its `n` (the sum of its inner counts)."""
    return attributes.integer(item, "n", 0) if item else 0


def parent(span: Bucket) -> tuple[Bucket, int]:
    """The bucket one level up holding `span`, and `span`'s position inside it."""
    level = windows.LEVELS[windows.LEVELS.index(span.resolution) + 1]
    outer = Bucket(level, span.first_minute // timebuckets.RESOLUTION_MINUTES[level])
    return outer, (span.first_minute - outer.first_minute) // timebuckets.RESOLUTION_MINUTES[span.resolution]


def enclosing(hours: Iterable[Bucket]) -> list[Bucket]:
    """These hours with their days and blocks."""
    spans = set(hours)
    days = {parent(hour)[0] for hour in spans}
    return sorted(spans | days | {parent(day)[0] for day in days})


def live_minute(settings: Settings, minute: int, now_ms: int) -> bool:
    """Whether a pending minute still counts: its hour bucket is within retention."""
    hour = Bucket("hour", minute // timebuckets.RESOLUTION_MINUTES["hour"])
    return timebuckets.live(hour, settings.view_bucket_retention_seconds, now_ms)


def kept(settings: Settings, span: Bucket, item: dict[str, Any] | None, now_ms: int) -> bool:
    """Whether a bucket's item (a count or a top URLs' summary) may be used now (timebuckets.kept)."""
    return timebuckets.kept(span, dynamo.stored_expiry(item), settings.view_bucket_retention_seconds, now_ms // 1000)


def pending_between(
    settings: Settings, counter: dict[str, Any] | None, first_minute: int, last_minute: int, now_ms: int
) -> int:
    """A counter's pending views in minutes first..last (inclusive) that still count."""
    return sum(
        n
        for minute, n in view_layout.pending_minutes(counter).items()
        if first_minute <= minute <= last_minute and live_minute(settings, minute, now_ms)
    )


def never_moved(counter: dict[str, Any] | None) -> bool:
    """Whether a counter read strongly has no bucket items: none was ever moved into (no `fv`)."""
    return counter is None or view_layout.FLUSHES not in counter


def flushes(item: dict[str, Any] | None, attribute: str = view_layout.FLUSHES) -> int:
    return attributes.integer(item, attribute, 0) if item else 0


# -- reading a counter with its buckets ----------------------------------------------------------


@dataclass(frozen=True)
class Stored:
    """A URL's counter item and some of its bucket items, read so that no move is counted twice."""

    counter: dict[str, Any] | None
    buckets: dict[Bucket, dict[str, Any] | None]

    def count(self, settings: Settings, span: Bucket, now_ms: int) -> int:
        """The URL's views in `span`: its bucket's and its pending minutes'."""
        pending = pending_between(settings, self.counter, span.first_minute, span.stop_minute - 1, now_ms)
        return total(self.buckets.get(span)) + pending


def read(
    dynamodb: DynamoDB,
    settings: Settings,
    wanted: Mapping[str, Sequence[Bucket]],
    sleep: Sleep | None = None,
    *,
    ordered: bool = False,
    counters: Mapping[str, dict[str, Any] | None] | None = None,
) -> dict[str, Stored]:
    """Each URL's (by counter partition) counter and the bucket items of its spans: one eventually
    consistent BatchGetItem, or `ordered` as docs/design.md, "Top URLs" reads them."""
    result: dict[str, Stored] = {}
    todo = dict(wanted)
    known = dict(counters or {})
    if ordered:  # a counter that never moved has no bucket items: its count is its pending minutes
        for pk in [pk for pk in todo if pk in known and never_moved(known[pk])]:
            result[pk] = Stored(known[pk], dict.fromkeys(todo.pop(pk)))
    for _ in range(MAX_READS):
        counter_keys = [view_layout.counter_key_of(pk) for pk in todo if not ordered or pk not in known]
        bucket_keys = [view_layout.bucket_key_of(pk, span) for pk, spans in todo.items() for span in spans]
        if ordered:
            found = _get(dynamodb, settings, counter_keys, sleep, consistent=True)
            found.update(_get(dynamodb, settings, bucket_keys, sleep, consistent=True))
        else:
            found = _get(dynamodb, settings, counter_keys + bucket_keys, sleep, consistent=False)
        again: dict[str, Sequence[Bucket]] = {}
        for pk, spans in todo.items():
            counter = known[pk] if ordered and pk in known else found.get((pk, view_layout.COUNTER_SK))
            buckets = {span: found.get((view_layout.bucket_pk(pk), view_layout.bucket_sk(span))) for span in spans}
            if any(flushes(b, view_layout.FLUSHED) > flushes(counter) for b in buckets.values()):
                again[pk] = spans
            else:
                result[pk] = Stored(counter, buckets)
        if not again:
            return result
        todo, ordered, known = again, True, {}
    raise StorageError("a URL's view buckets kept moving while they were read")


def _get(
    dynamodb: DynamoDB, settings: Settings, keys: list[dict[str, Any]], sleep: Sleep | None, consistent: bool
) -> dict[tuple[str, str], dict[str, Any]]:
    items = dynamo.batch_get_items(
        dynamodb, settings.counts_table, keys, "could not read the views", sleep, consistent=consistent
    )
    return attributes.by_key(items)


# -- the queue handler's side ---------------------------------------------------------------------


def settle(
    dynamodb: DynamoDB,
    settings: Settings,
    touched: Iterable[tuple[str, Bucket]],
    now_ms: int,
    sleep: Sleep | None,
    known: Mapping[str, dict[str, Any] | None],
) -> tuple[int, list[tuple[str, Bucket, int]]]:
    """After a batch's counts (`known`: its counters as last read or written), move the pending minutes
    of each URL over FLUSH_AT; returns the moves and each URL's views in the buckets touched."""
    hours: dict[str, set[Bucket]] = defaultdict(set)
    for pk, hour in touched:
        hours[pk].add(hour)
    keys = [view_layout.counter_key_of(pk) for pk in sorted(hours) if pk not in known]
    read_counters = _get(dynamodb, settings, keys, sleep, consistent=True)
    counters = {
        pk: known[pk] if pk in known else read_counters.get((pk, view_layout.COUNTER_SK)) for pk in sorted(hours)
    }
    moves = 0
    for pk in sorted(counters):
        for _ in range(MAX_MOVES):
            counter = counters[pk]
            if len(view_layout.pending_minutes(counter)) <= FLUSH_AT:
                break
            if not move(dynamodb, settings, pk, counter, now_ms, sleep):
                del counters[pk]  # changed since read: read again below
                break
            moves += 1
            counters[pk] = _get(dynamodb, settings, [view_layout.counter_key_of(pk)], sleep, True).get(
                (pk, view_layout.COUNTER_SK)
            )
    wanted = {pk: enclosing(spans) for pk, spans in hours.items()}
    found = read(dynamodb, settings, wanted, sleep, ordered=True, counters=counters)
    return moves, [
        (pk, span, stored.count(settings, span, now_ms)) for pk, stored in found.items() for span in wanted[pk]
    ]


def move(
    dynamodb: DynamoDB,
    settings: Settings,
    url_pk: str,
    counter: dict[str, Any] | None,
    now_ms: int,
    sleep: Sleep | None = None,
) -> bool:
    """Move a counter's pending minutes (as read in `counter`) into its buckets; False when it lost a race."""
    items = move_items(settings, url_pk, counter, now_ms)
    return bool(items) and transactions.write_items(dynamodb, items, what="view bucket move", sleep=sleep)


def move_items(settings: Settings, url_pk: str, counter: dict[str, Any] | None, now_ms: int) -> list[dict[str, Any]]:
    """The move of a counter's earliest pending minutes into their buckets (past retention: dropped). Pure."""
    pending = view_layout.pending_minutes(counter)
    if not pending:
        return []
    taken: list[int] = []
    increments: dict[Bucket, windows.Increment] = {}
    for minute in sorted(pending):
        spans = windows.spans_of(minute) if live_minute(settings, minute, now_ms) else []
        if len(taken) == MOVE_MINUTES or 1 + len(increments.keys() | {span for span, _ in spans}) > MOVE_ITEMS:
            break
        taken.append(minute)
        for span, position in spans:
            increments.setdefault(span, windows.Increment()).add(position, pending[minute])
    done = flushes(counter)
    names = {"#fv": view_layout.FLUSHES, "#v": "views"}
    values: dict[str, Any] = {":next": {"N": str(done + 1)}, ":v": (counter or {}).get("views", {"N": "0"})}
    condition = "#v = :v AND attribute_not_exists(#fv)"
    if counter and view_layout.FLUSHES in counter:
        condition = "#v = :v AND #fv = :fv"
        values[":fv"] = {"N": str(done)}
    names.update({f"#p{i}": view_layout.pending_attribute(minute) for i, minute in enumerate(taken)})
    removed = ", ".join(f"#p{i}" for i in range(len(taken)))
    update = {
        "TableName": settings.counts_table,
        "Key": view_layout.counter_key_of(url_pk),
        "UpdateExpression": f"SET #fv = :next REMOVE {removed}",
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }
    bucket_pk = view_layout.bucket_pk(url_pk)
    buckets = [
        bucket_update(settings, bucket_pk, span, increment, done + 1) for span, increment in sorted(increments.items())
    ]
    return [{"Update": update}, *buckets]


def bucket_update(
    settings: Settings, pk: str, span: Bucket, increment: windows.Increment, moved: int | None = None
) -> dict[str, Any]:
    """Add views to one bucket and to its inner buckets; (re)set its expiry and, for a move, `f`."""
    names = {"#n": "n"}
    values = {
        ":n": {"N": str(increment.n)},
        ":exp": {"N": str(timebuckets.expires_at_s(span, settings.view_bucket_retention_seconds))},
    }
    adds = ["#n :n"]
    sets = ["expires_at = :exp"]
    for position, k in sorted(increment.inner.items()):
        names[f"#i{position}"] = windows.inner_attribute(span.resolution, position)
        values[f":i{position}"] = {"N": str(k)}
        adds.append(f"#i{position} :i{position}")
    if moved is not None:
        names["#f"] = view_layout.FLUSHED
        values[":f"] = {"N": str(moved)}
        sets.append("#f = :f")
    return {
        "Update": {
            "TableName": settings.counts_table,
            "Key": {"pk": {"S": pk}, "sk": {"S": view_layout.bucket_sk(span)}},
            "UpdateExpression": f"ADD {', '.join(adds)} SET {', '.join(sets)}",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
    }
