"""Exact view counters, the queue handler side: apply a batch of views exactly once.

A view is counted when its marker is written: markers and the increment of their URL's counter
item (all time, and the pending count of each view's minute: chalicelib.views.rollup) go in one
TransactWriteItems, so all happen or none does. The views of one URL in a transaction share one
counter update, which is what makes a batch cheaper than a transaction per view, and a URL
viewed once costs what a transaction per view costs: its marker and its counter. Pending
minutes are moved into the URL's hour, day and block items later, in bulk, once the counter
holds enough of them (chalicelib.views.rollup.settle, exact under redelivery and races). A
redelivered view finds its marker: it is dropped before writing when the marker is already
visible, or else its transaction is cancelled with ConditionalCheckFailed on exactly that
marker, and the transaction is rebuilt without it (its counter increments shrink with it) and
retried.

At most once, whatever the path back: a marker lives until its view's own time plus the
horizon (settings.view_horizon_seconds, longer than the queue's and the dead-letter queue's
retention), and a message whose view is older than the horizon is set aside, not counted. So
a delivery of a view either finds its marker or is refused, however late it comes (a redrive
makes a new message whose retention starts again: docs/guarantees.md).

The batch runs through core.batch_processor (ViewMessages says what is the views' own).
Poison is what a message's content causes, and only that: a message is set aside (in the
queue's dead-letter queue, core.poison, with the reason, on its first delivery) when validation refuses it
(not JSON, not a view, text that cannot be encoded, older than the horizon) or when DynamoDB
refuses its data (a transaction that is refused is split in halves until the view it fails for
is alone). Any other failure, whatever the exception (storage unavailable, throttling that
outlasts the retries, a fault in the code), leaves the views it touched for redelivery: the
messages that were applied or set aside are deleted and the handler raises.
"""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chalicelib.core import attributes, batch_processor, dynamo, queues, timebuckets, transactions
from chalicelib.core.aws import SQS, DynamoDB
from chalicelib.core.batch_processor import BatchIncompleteError, Sent, Write
from chalicelib.core.batch_result import BatchResult
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import StorageError
from chalicelib.core.poison import DeadLetterSink
from chalicelib.core.queues import Message
from chalicelib.core.settings import Settings
from chalicelib.views import catalog, rollup, top_store, windows
from chalicelib.views import keys as view_keys
from chalicelib.views import messages as view_messages
from chalicelib.views import packing as view_packing
from chalicelib.views import validation as view_input
from chalicelib.views.windows import Span

MAX_TRANSACTION_ITEMS = 100
MAX_BACKOFFS = 6

__all__ = ["BatchIncompleteError", "Pending", "ViewMessages", "apply_messages", "commit"]


@dataclass
class Pending:
    """One distinct view of a batch and the messages that carry it."""

    sk: str
    messages: list[Message]
    url: str = ""  # kept on the URL's counter item (GET /views/urls)
    time_ms: int = 0  # counted in the buckets of this time (a client-day: its earliest view's)
    spans: tuple[Span, ...] = ()  # the hour bucket of that time, unless expired already

    @property
    def pk(self) -> str:
        return view_keys.url_pk(self.url)


class ViewMessages(batch_processor.Capability[Message, Pending]):
    """The views queue for the batch processor: a message is one view; views with the same
    marker are one; a marker already visible, or one a transaction's condition finds, is a view
    counted before. The handler deletes what it applied itself (core.queues), so a failure
    leaves only its own views for redelivery."""

    partial = True

    def __init__(
        self,
        dynamodb: DynamoDB,
        sqs: SQS,
        settings: Settings,
        now_ms: int,
        sleep: Sleep | None,
        max_items: int | None,
    ) -> None:
        self.dynamodb, self.sqs, self.settings, self.now_ms, self.sleep = dynamodb, sqs, settings, now_ms, sleep
        self.max_items = max_items or MAX_TRANSACTION_ITEMS
        self._sink = DeadLetterSink(sqs, settings.views_queue, sleep)

    @property
    def sink(self) -> DeadLetterSink:
        return self._sink

    def parse(self, raw: Message) -> list[Pending]:
        view = view_messages.from_message(raw.body)
        view_input.check_time(view, self.now_ms, self.settings.view_horizon_seconds, None, "message")
        sk = view_keys.marker_sk(view, self.settings.view_dedup)
        return [Pending(sk, [raw], view.url, view.time_ms, _live_spans(self.settings, view.time_ms, self.now_ms))]

    def key(self, record: Pending) -> tuple[str, str]:
        return record.pk, record.sk

    def combine(self, kept: Pending, again: Pending) -> Pending:
        time_ms = min(kept.time_ms, again.time_ms)
        spans = _live_spans(self.settings, time_ms, self.now_ms)
        return Pending(kept.sk, kept.messages + again.messages, kept.url, time_ms, spans)

    def checks(self, records: list[Pending]) -> list[Write[Pending]]:
        urls = {p.pk for p in records}
        return [Write((), functools.partial(self._catalog, urls)), Write(records, self._visible)]

    def _catalog(self, urls: set[str], _: list[Pending]) -> Sent[Pending]:
        catalog.record(self.dynamodb, self.settings, urls, self.now_ms, self.sleep)  # GET /views/urls
        return Sent()

    def _visible(self, records: list[Pending]) -> Sent[Pending]:
        seen = _visible_markers(self.dynamodb, self.settings, [(p.pk, p.sk) for p in records], self.now_ms, self.sleep)
        return Sent(found=[p for p in records if (p.pk, p.sk) in seen])

    def writes(self, records: list[Pending]) -> list[Write[Pending]]:
        groups: dict[str, list[Pending]] = defaultdict(list)
        for pending in records:
            groups[pending.pk].append(pending)
        ordered = [(pk, sorted(group, key=lambda p: (p.time_ms, p.sk))) for pk, group in sorted(groups.items())]
        return [
            Write([p for _, group in chunk for p in group], self._commit)
            for chunk in view_packing.chunks(ordered, self.max_items, _spans_of)
        ]

    def _commit(self, members: list[Pending]) -> Sent[Pending]:
        outcome = commit(self.dynamodb, self.settings, members, self.now_ms, self.sleep)
        return Sent(applied=outcome.applied, found=outcome.duplicates, calls=outcome.attempts, retries=outcome.retries)

    def follow_ups(self, outcome: batch_processor.Outcome[Message, Pending]) -> list[Write[Pending]]:
        return [Write(outcome.settled() + outcome.checked, self._settle)]

    def _settle(self, members: list[Pending]) -> Sent[Pending]:
        """Move the pending minutes of the URLs of every view counted now or before (a
        duplicate's URL may be what a handler that died left unsettled) that hold enough of
        them, and bring the top URLs' summaries up to the counts read. If that fails, every
        view it was for comes back with its message, and it is done then."""
        touched = {(p.pk, span) for p in members for span in p.spans}
        observed = top_store.Observations()  # the top URLs' summaries take the counts read here
        moves = rollup.settle(self.dynamodb, self.settings, touched, self.now_ms, self.sleep, observed.add)
        summaries = top_store.record(self.dynamodb, self.settings, observed, self.sleep)
        return Sent(details=Counter(bucket_moves=moves, top_writes=summaries))

    def acknowledge(self, done: Sequence[Message]) -> None:
        queue = queues.queue_url(self.sqs, self.settings.views_queue)
        queues.delete(self.sqs, queue, [m.receipt_handle for m in done], self.sleep)


def apply_messages(
    dynamodb: DynamoDB,
    sqs: SQS,
    settings: Settings,
    messages: list[Message],
    now_ms: int,
    sleep: Sleep | None = None,
    max_items: int | None = None,
) -> BatchResult:
    """Count a batch; raises BatchIncompleteError, after removing every other message from the
    queue, when some views could not be written (they come back with the batch)."""
    return batch_processor.process(ViewMessages(dynamodb, sqs, settings, now_ms, sleep, max_items), messages)


def _live_spans(settings: Settings, time_ms: int, now_ms: int) -> tuple[Span, ...]:
    """The hour bucket a view is counted in (its minute pending on the counter until moved
    there, with its day and block: chalicelib.views.rollup); one already expired would read
    as 0, so the view counts in all time only."""
    placed = windows.spans_of(time_ms // windows.MINUTE_MS)
    return tuple(
        span
        for span, _ in placed
        if span.level == "hour" and timebuckets.live(span, settings.view_bucket_retention_seconds, now_ms)
    )


def _spans_of(pending: Pending) -> tuple[Span, ...]:
    """The bucket items a view adds to its transaction besides its marker and its URL's
    counter: none (its minute is an attribute of the counter)."""
    return ()


def _visible_markers(
    dynamodb: DynamoDB, settings: Settings, keys: list[tuple[str, str]], now_ms: int, sleep: Sleep | None
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
            if attributes.integer(item, "expires_at") > now_s:
                found.add(attributes.key_of(item))
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
        items.append(_counter_update(table, pk, members, now_ms))
    return items


def _counter_update(table: str, pk: str, members: list[Pending], now_ms: int) -> dict[str, Any]:
    """Add a transaction's views of one URL to its counter: all time, and pending per minute
    (only views whose hour bucket is live)."""
    minutes = Counter(p.time_ms // windows.MINUTE_MS for p in members if p.spans)
    names = {"#v": "views", "#u": "url", "#l": catalog.LAST_COUNTED, "#c": catalog.LISTED}
    values: dict[str, Any] = {
        ":k": {"N": str(len(members))},
        ":u": {"S": members[0].url},
        ":now": {"N": str(now_ms)},
        ":yes": {"BOOL": True},
    }
    adds = ["#v :k"]
    for i, (minute, k) in enumerate(sorted(minutes.items())):
        names[f"#p{i}"] = view_keys.pending_attribute(minute)
        values[f":p{i}"] = {"N": str(k)}
        adds.append(f"#p{i} :p{i}")
    return {
        "Update": {
            "TableName": table,
            "Key": {"pk": {"S": pk}, "sk": {"S": view_keys.COUNTER_SK}},
            "UpdateExpression": f"ADD {', '.join(adds)} SET #u = if_not_exists(#u, :u), #l = :now, #c = :yes",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
    }


def commit(
    dynamodb: DynamoDB, settings: Settings, members: list[Pending], now_ms: int, sleep: Sleep | None
) -> transactions.Outcome[Pending]:
    """Apply views in one transaction (their markers and counters), or learn that
    an earlier delivery did: a marker's failed condition names its view as a duplicate."""

    def plan(pending: list[Pending]) -> transactions.Plan[Pending]:
        groups: dict[str, list[Pending]] = defaultdict(list)
        for member in pending:
            groups[member.pk].append(member)
        regrouped = list(groups.items())
        items = _transaction(settings, regrouped, now_ms)
        # Item order is each group's markers, then its counter update (owned by no one view).
        owners: list[Pending | None] = []
        for _, group in regrouped:
            owners += group + [None]
        assert len(owners) == len(items)
        return transactions.Plan(items, owners)

    def already_counted(failed: list[Pending | None], pending: list[Pending]) -> list[Pending]:
        return [member for member in failed if member is not None]

    return transactions.write(
        dynamodb,
        members,
        plan,
        what="view transaction",
        duplicates=already_counted,
        attempts=MAX_BACKOFFS,
        sleep=sleep,
    )
