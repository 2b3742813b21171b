"""Exact view counters: enqueue views, apply queue batches exactly once, answer counts.

A view is counted when its marker is written: markers and the increment of their URL's
counter go in one TransactWriteItems, so both happen or neither does. The views of one URL
in a batch share one increment of K, which is what makes a batch cheaper than a transaction
per view. A redelivered view finds its marker: it is dropped before writing when the marker
is already visible, or else its transaction is cancelled with ConditionalCheckFailed on
exactly that marker, and the transaction is retried without it.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable

from botocore.exceptions import ClientError

from chalicelib import dynamo, queues, validation, view_keys
from chalicelib.errors import StorageError, ValidationError
from chalicelib.queues import Message
from chalicelib.settings import Settings
from chalicelib.retry import backoff
from chalicelib.view_keys import View

Sleep = Callable[[float], None]
MAX_TRANSACTION_ITEMS = 100
MAX_BACKOFFS = 6
_RETRYABLE_ERRORS = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "TransactionInProgressException",
    "InternalServerError",
}


class RejectedError(StorageError):
    """DynamoDB refused a transaction for a reason retrying will not change."""


class BatchIncompleteError(StorageError):
    """Some views of a batch could not be counted; the others were removed from the queue."""


# -- POST /views -------------------------------------------------------------------------------

def enqueue(sqs: Any, settings: Settings, views: list[View], sleep: Sleep | None = None) -> None:
    # A retried request cannot count twice (markers), so a partly sent batch is simply retried.
    url = queues.queue_url(sqs, settings.views_queue)
    entries = [{"Id": str(i), "MessageBody": view_keys.to_message(v)} for i, v in enumerate(views)]
    queues.send(sqs, url, entries, sleep or time.sleep)


# -- GET /views ----------------------------------------------------------------------------------

def count(
    dynamodb: Any, settings: Settings, url: str, start_ms: int | None, end_ms: int | None, now_ms: int
) -> dict[str, Any]:
    """The URL's counter, or with start and/or end the markers of views in [start, end)."""
    if start_ms is None and end_ms is None:
        try:
            item = dynamodb.get_item(TableName=settings.counts_table, Key=view_keys.counter_key(url)).get("Item")
        except ClientError as exc:
            raise StorageError("could not read the view counter") from exc
        return {"url": url, "views": int(item["views"]["N"]) if item else 0}
    start = now_ms - settings.view_marker_ttl_seconds * 1000 if start_ms is None else start_ms
    end = now_ms if end_ms is None else end_ms
    if start >= end:
        raise ValidationError("start must be before end")
    low, high = view_keys.marker_range(start, end, settings.view_dedup)
    request: dict[str, Any] = {
        "TableName": settings.counts_table,
        "KeyConditionExpression": "pk = :pk AND sk BETWEEN :low AND :high",
        # A marker past its expiry may linger until DynamoDB deletes it: it no longer counts.
        "FilterExpression": "expires_at > :now",
        "ExpressionAttributeValues": {
            ":pk": {"S": view_keys.url_pk(url)},
            ":low": {"S": low},
            ":high": {"S": high},
            ":now": {"N": str(now_ms // 1000)},
        },
        "Select": "COUNT",
    }
    pages = dynamo.query_pages(dynamodb, request, "could not count the view markers")
    total = sum(int(page.get("Count", 0)) for page in pages)
    return {"url": url, "views": total, "start": validation.iso(start), "end": validation.iso(end)}


# -- the queue handler ----------------------------------------------------------------------------

@dataclass
class Pending:
    """One distinct view of a batch and the messages that carry it."""

    sk: str
    messages: list[Message]


@dataclass
class BatchResult:
    counted: int = 0
    duplicates: int = 0
    poison: int = 0
    failed: int = 0
    transactions: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class _Outcome:
    done: list[Message] = field(default_factory=list)
    failed: list[Message] = field(default_factory=list)


def apply_messages(
    dynamodb: Any,
    sqs: Any,
    settings: Settings,
    messages: list[Message],
    now_ms: int,
    sleep: Sleep | None = None,
    max_items: int | None = None,
) -> BatchResult:
    """Count a batch; raises BatchIncompleteError, after removing every other message from the
    queue, when some views could not be written (they come back with the batch)."""
    sleep = sleep or time.sleep
    result = BatchResult()
    outcome = _Outcome()
    distinct: dict[tuple[str, str], Pending] = {}
    poison: list[tuple[Message, str]] = []
    for message in messages:
        try:
            view = view_keys.from_message(message.body)
        except ValidationError as exc:
            poison.append((message, str(exc)))
            continue
        key = (view_keys.url_pk(view.url), view_keys.marker_sk(view, settings.view_dedup))
        if key in distinct:
            distinct[key].messages.append(message)
            result.duplicates += 1
        else:
            distinct[key] = Pending(key[1], [message])

    seen = _visible_markers(dynamodb, settings, list(distinct), now_ms, sleep)
    groups: dict[str, list[Pending]] = defaultdict(list)
    for key, pending in distinct.items():
        if key in seen:
            result.duplicates += 1
            outcome.done.extend(pending.messages)
        else:
            groups[key[0]].append(pending)

    for chunk in view_keys.chunks(sorted(groups.items()), max_items or MAX_TRANSACTION_ITEMS):
        _apply_chunk(dynamodb, settings, chunk, now_ms, sleep, result, outcome)

    if poison:
        try:
            _set_aside(sqs, settings, poison, sleep)
            outcome.done.extend(message for message, _ in poison)
            result.poison = len(poison)
        except StorageError:
            # Left in the queue: its redrive policy moves it to the dead-letter queue in the end.
            outcome.failed.extend(message for message, _ in poison)
    if outcome.failed:
        queues.delete(sqs, queues.queue_url(sqs, settings.views_queue), [m.receipt_handle for m in outcome.done], sleep)
        raise BatchIncompleteError(f"{len(outcome.failed)} of {len(messages)} messages must be retried: {result.as_dict()}")
    return result


def _apply_chunk(
    dynamodb: Any,
    settings: Settings,
    chunk: list[tuple[str, list[Pending]]],
    now_ms: int,
    sleep: Sleep,
    result: BatchResult,
    outcome: _Outcome,
) -> None:
    try:
        counted, duplicates, transactions = _commit(dynamodb, settings, chunk, now_ms, sleep)
    except StorageError as exc:
        # A view DynamoDB rejects outright must not hold back the others: halve until it is alone.
        parts = view_keys.halves(chunk) if isinstance(exc, RejectedError) else []
        for part in parts:
            _apply_chunk(dynamodb, settings, part, now_ms, sleep, result, outcome)
        if not parts:
            outcome.failed.extend(m for _, members in chunk for pending in members for m in pending.messages)
            result.failed += sum(len(members) for _, members in chunk)
        return
    result.counted += counted
    result.duplicates += duplicates
    result.transactions += transactions
    outcome.done.extend(m for _, members in chunk for pending in members for m in pending.messages)


def _visible_markers(
    dynamodb: Any, settings: Settings, keys: list[tuple[str, str]], now_ms: int, sleep: Sleep
) -> set[tuple[str, str]]:
    """Markers already written and live. Reads are cheaper than cancelled transactions; if this
    read fails the transactions' conditions still catch every duplicate."""
    found: set[tuple[str, str]] = set()
    now_s = now_ms // 1000
    items = dynamo.batch_get_items(
        dynamodb, settings.counts_table, [{"pk": {"S": pk}, "sk": {"S": sk}} for pk, sk in keys],
        "could not read the view markers", sleep, attempts=MAX_BACKOFFS, cap=1.0, projection="pk, sk, expires_at",
    )
    try:
        for item in items:
            if int(item["expires_at"]["N"]) > now_s:
                found.add((item["pk"]["S"], item["sk"]["S"]))
    except StorageError:
        pass  # an optimisation only: what was read still saves cancelled transactions
    return found


def _transaction(settings: Settings, chunk: list[tuple[str, list[Pending]]], now_ms: int) -> list[dict[str, Any]]:
    now_s = now_ms // 1000
    table = settings.counts_table
    items: list[dict[str, Any]] = []
    for pk, members in chunk:
        items.extend(
            {
                "Put": {
                    "TableName": table,
                    "Item": {
                        "pk": {"S": pk},
                        "sk": {"S": p.sk},
                        "expires_at": {"N": str(now_s + settings.view_marker_ttl_seconds)},
                    },
                    "ConditionExpression": "attribute_not_exists(pk) OR expires_at < :now",
                    "ExpressionAttributeValues": {":now": {"N": str(now_s)}},
                }
            }
            for p in members
        )
        items.append(
            {
                "Update": {
                    "TableName": table,
                    "Key": {"pk": {"S": pk}, "sk": {"S": view_keys.COUNTER_SK}},
                    "UpdateExpression": "ADD #v :k",
                    "ExpressionAttributeNames": {"#v": "views"},
                    "ExpressionAttributeValues": {":k": {"N": str(len(members))}},
                }
            }
        )
    return items


def _commit(
    dynamodb: Any,
    settings: Settings,
    chunk: list[tuple[str, list[Pending]]],
    now_ms: int,
    sleep: Sleep,
) -> tuple[int, int, int]:
    """Apply one transaction's worth of groups; returns (counted, duplicates, attempts)."""
    duplicates = 0
    attempts = 0
    backoffs = 0
    while chunk:
        attempts += 1
        try:
            dynamodb.transact_write_items(TransactItems=_transaction(settings, chunk, now_ms))
            return sum(len(members) for _, members in chunk), duplicates, attempts
        except ClientError as exc:
            error = exc.response.get("Error", {}).get("Code", "")
            reasons = dynamo.cancellation_reasons(exc)
        if reasons is not None:
            # Item order is each group's markers, then its counter update.
            dropped: set[int] = set()
            position = 0
            for pk, members in chunk:
                for pending in members:
                    if position < len(reasons) and reasons[position] == "ConditionalCheckFailed":
                        dropped.add(id(pending))
                    position += 1
                position += 1
            if dropped:
                duplicates += len(dropped)
                chunk = [(pk, kept) for pk, members in chunk if (kept := [p for p in members if id(p) not in dropped])]
                continue
            retryable = bool(reasons) and all(code in dynamo.RETRYABLE_CANCELLATIONS | {"None"} for code in reasons)
        else:
            retryable = error in _RETRYABLE_ERRORS
        if not retryable:
            raise RejectedError(f"view transaction rejected: {error} {reasons}")
        if backoffs >= MAX_BACKOFFS:
            raise StorageError(f"view transaction kept failing: {error} {reasons}")
        sleep(backoff(backoffs))
        backoffs += 1
    return 0, duplicates, attempts


def _set_aside(sqs: Any, settings: Settings, poison: list[tuple[Message, str]], sleep: Sleep) -> None:
    entries = [
        {
            "Id": str(i),
            "MessageBody": message.body or "(empty)",
            "MessageAttributes": {
                "reason": {"DataType": "String", "StringValue": reason[:1000]},
                "source_message_id": {"DataType": "String", "StringValue": message.message_id or "unknown"},
            },
        }
        for i, (message, reason) in enumerate(poison)
    ]
    queues.send(sqs, queues.dead_letter_url(sqs, settings.views_queue), entries, sleep)
