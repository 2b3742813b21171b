"""Day and block items of a URL's views, derived from its hour items: idempotent, race-free.

Only the hour item (`n`, `m00`..`m59`) is written in the counting transaction, with the markers
and the counter; what a day item holds of an hour (`hHH`) is a copy of that hour's `n`, and what
a block item holds of a day (`dDD`) is that day's total (the sum of its `hHH`). Copies are
written with a condition that they only grow (`SET a = :v` if `a` is absent or smaller), and
every value written is a true snapshot of a count that only grows (markers are never taken
back while a view of that hour can still be counted: views older than the horizon are
refused, and buckets are kept at least that long). So writing a copy twice, late, or in any
order with other writers changes nothing, and the largest copy is the latest:

- after its transaction commits, a handler reads each hour it touched with a strongly
  consistent read, so the last transaction on an hour is followed by a read that sees its
  final count, and that count reaches the day;
- the day update returns the whole day item as it stands after the update (or, if the
  condition failed, as it stood), so the last update of a day sees all its hours, and its sum
  reaches the block;
- a handler that dies between its transaction and these copies leaves its messages in the
  queue; on redelivery its views are duplicates, and the copies are made for the hours of
  duplicates too (after reading that they are missing: a duplicate whose copies are in place
  costs reads, no writes).

A day or block item's total is the sum of its inner counts, read from the item a range reads
anyway (chalicelib.views.api); items written before this layout hold `n` and the same inner
counts, so they read the same.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from botocore.exceptions import ClientError

from chalicelib.core import dynamo, timebuckets, transactions
from chalicelib.core.aws import DynamoDB
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import StorageError
from chalicelib.core.settings import Settings
from chalicelib.views import keys as view_keys
from chalicelib.views import windows
from chalicelib.views.windows import Span


def total(level: str, item: dict[str, Any] | None) -> int:
    """A bucket item's views: an hour's `n`; a day's or block's, the sum of its inner counts."""
    if item is None:
        return 0
    if level == "hour":
        return int(item.get("n", {"N": "0"})["N"])
    prefix, _ = windows.INNER[level]
    return sum(int(value["N"]) for name, value in item.items() if len(name) == 3 and name.startswith(prefix))


def derive(
    dynamodb: DynamoDB,
    settings: Settings,
    touched: Iterable[tuple[str, Span]],
    sleep: Sleep | None = None,
    observe: Callable[[str, Span, int], None] | None = None,
) -> int:
    """Bring the day and block items of these (bucket partition, hour) pairs up to their hours;
    returns the writes made. Raises StorageError if storage fails (the caller's messages then
    come back, and the copies are made on redelivery). `observe` is told each hour's, day's
    and block's total as read here: a snapshot of a count that only grows, taken after the
    batch's own writes (the top URLs summaries take them, chalicelib.views.top)."""
    hours = sorted(set(touched))
    if not hours:
        return 0
    days = sorted({(pk, parent(span)[0]) for pk, span in hours})
    blocks = sorted({(pk, parent(day)[0]) for pk, day in days})
    keys = [_key(pk, span) for pk, span in hours + days + blocks]
    stored = {
        (item["pk"]["S"], item["sk"]["S"]): item
        for item in dynamo.batch_get_items(
            dynamodb, settings.counts_table, keys, "could not read view buckets", sleep, consistent=True
        )
    }
    writes = 0
    day_items: dict[tuple[str, Span], dict[str, Any] | None] = {
        (pk, day): stored.get((pk, view_keys.bucket_sk(day))) for pk, day in days
    }
    for pk, hour in hours:
        n = total("hour", stored.get((pk, view_keys.bucket_sk(hour))))
        if observe is not None:
            observe(pk, hour, n)
        day, position = parent(hour)
        attribute = windows.inner_attribute("day", position)
        if n and _inner(day_items[(pk, day)], attribute) < n:
            day_items[(pk, day)] = _raise_to(dynamodb, settings, pk, day, attribute, n)
            writes += 1
    block_sums: dict[tuple[str, Span], dict[str, int]] = defaultdict(dict)
    for pk, day in days:
        block, position = parent(day)
        block_sums[(pk, block)][windows.inner_attribute("block", position)] = total("day", day_items[(pk, day)])
        if observe is not None:
            observe(pk, day, total("day", day_items[(pk, day)]))
    for (pk, block), sums in sorted(block_sums.items()):
        item = stored.get((pk, view_keys.bucket_sk(block)))
        for attribute, value in sorted(sums.items()):
            if value and _inner(item, attribute) < value:
                item = _raise_to(dynamodb, settings, pk, block, attribute, value)
                writes += 1
        if observe is not None:
            observe(pk, block, total("block", item))
    return writes


def parent(span: Span) -> tuple[Span, int]:
    """The bucket one level up holding `span`, and `span`'s position inside it."""
    level = windows.LEVELS[windows.LEVELS.index(span.level) + 1]
    outer = Span(level, span.start_minute // windows.SIZE_MINUTES[level])
    return outer, (span.start_minute - outer.start_minute) // windows.SIZE_MINUTES[span.level]


def _inner(item: dict[str, Any] | None, attribute: str) -> int:
    return 0 if item is None or attribute not in item else int(item[attribute]["N"])


def _key(pk: str, span: Span) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": view_keys.bucket_sk(span)}}


def _raise_to(
    dynamodb: DynamoDB, settings: Settings, pk: str, span: Span, attribute: str, value: int
) -> dict[str, Any]:
    """Set `attribute` of a bucket item to `value` unless it already holds as much; the item as
    it stands afterwards."""
    expires = timebuckets.expires_at_s(span, settings.view_bucket_retention_seconds)
    try:
        response = dynamodb.update_item(
            TableName=settings.counts_table,
            Key=_key(pk, span),
            UpdateExpression="SET #a = :v, expires_at = :exp",
            ConditionExpression="attribute_not_exists(#a) OR #a < :v",
            ExpressionAttributeNames={"#a": attribute},
            ExpressionAttributeValues={":v": {"N": str(value)}, ":exp": {"N": str(expires)}},
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except ClientError as exc:
        if transactions.error_code(exc) == "ConditionalCheckFailedException":
            return dict(exc.response.get("Item") or {})  # someone wrote as much or more: as it stands
        raise StorageError("could not write a view bucket") from exc
    return dict(response.get("Attributes") or {})
