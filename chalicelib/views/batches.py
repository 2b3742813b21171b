"""Exact view counters, the queue handler side: apply a batch of views exactly once.

A view is counted when its marker is written: markers, the increment of their URL's counter
and the increments of the URL's hour buckets (chalicelib.views.windows: the hours of the
views' own times, with their minute counts) go in one TransactWriteItems, so all happen or none
does. The views of one URL in a transaction share one increment of K per item, which is what
makes a batch cheaper than a transaction per view. The day and block items are then brought
up to those hours outside the transaction, by copies that only grow (chalicelib.views.rollup):
one plain write each instead of a transactional one, exact under redelivery and races. A redelivered view
finds its marker: it is dropped before writing when the marker is already visible, or else its
transaction is cancelled with ConditionalCheckFailed on exactly that marker, and the
transaction is rebuilt without it (its bucket increments shrink with it) and retried.

At most once, whatever the path back: a marker lives until its view's own time plus the
horizon (settings.view_horizon_seconds, longer than the queue's and the dead-letter queue's
retention), and a message whose view is older than the horizon is set aside, not counted. So
a delivery of a view either finds its marker or is refused, however late it comes (a redrive
makes a new message whose retention starts again: docs/guarantees.md).

Poison is what a message's content causes, and only that: a message is set aside (in the
queue's dead-letter queue, with the reason, on its first delivery) when validation refuses it
(not JSON, not a view, text that cannot be encoded, older than the horizon) or when DynamoDB
refuses its data (a transaction that is refused is split in halves until the view it fails for
is alone). Any other failure, whatever the exception (storage unavailable, throttling that
outlasts the retries, a fault in the code), leaves the views it touched for redelivery: the
messages that were applied or set aside are deleted and the handler raises.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core import dynamo, queues, timebuckets, transactions
from chalicelib.core.batch_result import BatchResult
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import RejectedError, StorageError, ValidationError, reason
from chalicelib.core.queues import Message
from chalicelib.core.settings import Settings
from chalicelib.views import catalog, rollup, top_store, windows
from chalicelib.views import keys as view_keys
from chalicelib.views.windows import Span

MAX_TRANSACTION_ITEMS = 100
MAX_BACKOFFS = 6


class BatchIncompleteError(StorageError):
    """Some views of a batch could not be counted; the others were removed from the queue."""


@dataclass
class Pending:
    """One distinct view of a batch and the messages that carry it."""

    sk: str
    messages: list[Message]
    url: str = ""  # kept on the URL's counter item (GET /views/urls)
    time_ms: int = 0  # counted in the buckets of this time (a client-day: its earliest view's)
    spans: tuple[Span, ...] = ()  # those buckets, the ones not expired yet


@dataclass
class _Outcome:
    done: list[Message] = field(default_factory=list)
    failed: list[Message] = field(default_factory=list)
    poison: list[tuple[Message, str]] = field(default_factory=list)
    error: BaseException | None = None  # the first failure that left views for redelivery


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
    result = BatchResult(records=len(messages))
    outcome = _Outcome()
    distinct: dict[tuple[str, str], Pending] = {}
    for message in messages:
        try:
            view = view_keys.from_message(message.body)
            view_keys.check_time(view, now_ms, settings.view_horizon_seconds, None, "message")
        except ValidationError as exc:  # the message's content: set aside, never retried
            outcome.poison.append((message, reason(exc)))
            continue
        key = (view_keys.url_pk(view.url), view_keys.marker_sk(view, settings.view_dedup))
        if key in distinct:
            distinct[key].messages.append(message)
            distinct[key].time_ms = min(distinct[key].time_ms, view.time_ms)
            result.duplicates += 1
        else:
            distinct[key] = Pending(key[1], [message], view.url, view.time_ms)

    catalog.record(dynamodb, settings, {pk for pk, _ in distinct}, now_ms)  # GET /views/urls
    seen = _visible_markers(dynamodb, settings, list(distinct), now_ms, sleep)
    groups: dict[str, list[Pending]] = defaultdict(list)
    for key, pending in distinct.items():
        pending.spans = _live_spans(settings, pending.time_ms, now_ms)
        if key in seen:
            result.duplicates += 1
            outcome.done.extend(pending.messages)
        else:
            groups[key[0]].append(pending)

    ordered = [(pk, sorted(group, key=lambda p: (p.time_ms, p.sk))) for pk, group in sorted(groups.items())]
    for chunk in view_keys.chunks(ordered, max_items or MAX_TRANSACTION_ITEMS, _spans_of):
        _apply_chunk(dynamodb, settings, chunk, now_ms, sleep, result, outcome)

    _derive_days_and_blocks(dynamodb, settings, distinct, outcome, sleep, result)

    if outcome.poison:
        try:
            _set_aside(sqs, settings, outcome.poison, sleep)
            outcome.done.extend(message for message, _ in outcome.poison)
            result.quarantined += [message.message_id for message, _ in outcome.poison]
            result.details["dead_lettered"] += len(outcome.poison)
        except StorageError:
            # Left in the queue: its redrive policy moves it to the dead-letter queue in the end.
            outcome.failed.extend(message for message, _ in outcome.poison)
    if outcome.failed:
        queues.delete(sqs, queues.queue_url(sqs, settings.views_queue), [m.receipt_handle for m in outcome.done], sleep)
        raise BatchIncompleteError(
            f"{len(outcome.failed)} of {len(messages)} messages must be retried: {result.as_dict()}"
        ) from outcome.error
    return result


def _live_spans(settings: Settings, time_ms: int, now_ms: int) -> tuple[Span, ...]:
    """The hour bucket a view is counted in by its transaction (its day and block follow from
    it, chalicelib.views.rollup); one already expired would read as 0, so it is skipped."""
    placed = windows.spans_of(time_ms // windows.MINUTE_MS)
    return tuple(
        span
        for span, _ in placed
        if span.level == "hour" and timebuckets.live(span, settings.view_bucket_retention_seconds, now_ms)
    )


def _derive_days_and_blocks(
    dynamodb: Any,
    settings: Settings,
    distinct: dict[tuple[str, str], Pending],
    outcome: _Outcome,
    sleep: Sleep | None,
    result: BatchResult,
) -> None:
    """Copy the hours of every view counted now or before (a duplicate's copies may be what a
    handler that died left undone) into their days and blocks. If that fails, every view it
    was for comes back with its message, and the copies are made then."""
    failed = {id(m) for m in outcome.failed}
    members = [
        (pk, pending) for (pk, _), pending in distinct.items() if not any(id(m) in failed for m in pending.messages)
    ]
    touched = {(view_keys.bucket_pk(pk), span) for pk, pending in members for span in pending.spans}
    try:
        observed = top_store.Observations()  # the top URLs' summaries take the counts read here
        result.details["bucket_copies"] += rollup.derive(dynamodb, settings, touched, sleep, observed.add)
        result.details["top_writes"] += top_store.record(dynamodb, settings, observed, sleep)
    except Exception as exc:  # not about any one view
        ids = {id(m) for _, pending in members for m in pending.messages}
        outcome.done = [m for m in outcome.done if id(m) not in ids]
        outcome.failed.extend(m for _, pending in members for m in pending.messages)
        result.failed += len(members)
        outcome.error = outcome.error or exc


def _spans_of(pending: Pending) -> tuple[Span, ...]:
    return pending.spans


def _apply_chunk(
    dynamodb: Any,
    settings: Settings,
    chunk: list[tuple[str, list[Pending]]],
    now_ms: int,
    sleep: Sleep | None,
    result: BatchResult,
    outcome: _Outcome,
) -> None:
    try:
        counted, duplicates, attempts, retries = _commit(dynamodb, settings, chunk, now_ms, sleep)
    except Exception as exc:
        if not isinstance(exc, RejectedError):
            # Not about any one view's data: every view here waits for redelivery.
            outcome.failed.extend(m for _, members in chunk for pending in members for m in pending.messages)
            result.failed += sum(len(members) for _, members in chunk)
            outcome.error = outcome.error or exc
            return
        # DynamoDB refuses some view's data: halve until it is alone, and set it aside; the
        # others are applied.
        parts = view_keys.halves(chunk)
        for part in parts:
            _apply_chunk(dynamodb, settings, part, now_ms, sleep, result, outcome)
        if not parts:
            ((_, (lone,)),) = chunk
            outcome.poison.extend((message, reason(exc)) for message in lone.messages)
        return
    result.counted += counted
    result.duplicates += duplicates
    result.transactions += attempts
    result.retries += retries
    outcome.done.extend(m for _, members in chunk for pending in members for m in pending.messages)


def _visible_markers(
    dynamodb: Any, settings: Settings, keys: list[tuple[str, str]], now_ms: int, sleep: Sleep | None
) -> set[tuple[str, str]]:
    """Markers already written and live. Reads are cheaper than cancelled transactions; if this
    read fails the transactions' conditions still catch every duplicate."""
    found: set[tuple[str, str]] = set()
    now_s = now_ms // 1000
    items = dynamo.batch_get_items(
        dynamodb,
        settings.counts_table,
        [{"pk": {"S": pk}, "sk": {"S": sk}} for pk, sk in keys],
        "could not read the view markers",
        sleep,
        attempts=MAX_BACKOFFS,
        cap=1.0,
        projection="pk, sk, expires_at",
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
                        "expires_at": {
                            "N": str(
                                view_keys.marker_expires_at_s(
                                    p.time_ms, settings.view_dedup, settings.view_horizon_seconds
                                )
                            )
                        },
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
                    "UpdateExpression": "ADD #v :k SET #u = if_not_exists(#u, :u)",
                    "ExpressionAttributeNames": {"#v": "views", "#u": "url"},
                    "ExpressionAttributeValues": {":k": {"N": str(len(members))}, ":u": {"S": members[0].url}},
                }
            }
        )
        live = {span for p in members for span in p.spans}
        for span, increment in sorted(windows.increments((p.time_ms for p in members), live).items()):
            items.append(_bucket_update(settings, view_keys.bucket_pk(pk), span, increment))
    return items


def _bucket_update(settings: Settings, pk: str, span: Span, increment: windows.Increment) -> dict[str, Any]:
    """Add a transaction's views to one bucket and to its inner buckets; (re)set its expiry."""
    names = {"#n": "n"}
    values = {
        ":n": {"N": str(increment.n)},
        ":exp": {"N": str(timebuckets.expires_at_s(span, settings.view_bucket_retention_seconds))},
    }
    adds = ["#n :n"]
    for position, k in sorted(increment.inner.items()):
        names[f"#i{position}"] = windows.inner_attribute(span.level, position)
        values[f":i{position}"] = {"N": str(k)}
        adds.append(f"#i{position} :i{position}")
    return {
        "Update": {
            "TableName": settings.counts_table,
            "Key": {"pk": {"S": pk}, "sk": {"S": view_keys.bucket_sk(span)}},
            "UpdateExpression": f"ADD {', '.join(adds)} SET expires_at = :exp",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
    }


def _commit(
    dynamodb: Any,
    settings: Settings,
    chunk: list[tuple[str, list[Pending]]],
    now_ms: int,
    sleep: Sleep | None,
) -> tuple[int, int, int, int]:
    """Apply one transaction's worth of groups; returns (counted, duplicates, attempts, retries)."""
    members = [pending for _, group in chunk for pending in group]
    urls = {id(pending): pk for pk, group in chunk for pending in group}

    def plan(pending: list[Pending]) -> transactions.Plan[Pending]:
        groups: dict[str, list[Pending]] = defaultdict(list)
        for member in pending:
            groups[urls[id(member)]].append(member)
        regrouped = list(groups.items())
        items = _transaction(settings, regrouped, now_ms)
        # Item order is each group's markers, then its counter and bucket updates (owned by no one view).
        owners: list[Pending | None] = []
        for _, group in regrouped:
            owners += group
            owners += [None] * (1 + len({span for p in group for span in p.spans}))
        assert len(owners) == len(items)
        return transactions.Plan(items, owners)

    def already_counted(failed: list[Pending | None], pending: list[Pending]) -> list[Pending]:
        return [member for member in failed if member is not None]

    outcome = transactions.write(
        dynamodb,
        members,
        plan,
        what="view transaction",
        duplicates=already_counted,
        attempts=MAX_BACKOFFS,
        sleep=sleep,
    )
    return len(outcome.applied), len(outcome.duplicates), outcome.attempts, outcome.retries


def _set_aside(sqs: Any, settings: Settings, poison: list[tuple[Message, str]], sleep: Sleep | None) -> None:
    entries = [
        {
            "Id": str(i),
            "MessageBody": queues.sendable(message.body) or "(empty)",
            "MessageAttributes": {
                "reason": {"DataType": "String", "StringValue": queues.sendable(why[:1000])},
                "source_message_id": {
                    "DataType": "String",
                    "StringValue": queues.sendable(message.message_id) or "unknown",
                },
            },
        }
        for i, (message, why) in enumerate(poison)
    ]
    queues.send(sqs, queues.dead_letter_url(sqs, settings.views_queue), entries, sleep)
