"""Exact view counters, the queue handler side: a batch of views counted exactly once through
core.batch_processor (`ViewMessages`). Why: docs/design.md, "Exactly once", "At most once, provably:
the horizon" and "Where poison goes"."""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from chalicelib.core import attributes, batch_processor, dynamo, queues, retry
from chalicelib.core.aws import SQS, DynamoDB
from chalicelib.core.batch_processor import BatchIncompleteError, Sent, Write
from chalicelib.core.batch_result import BatchResult
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import StorageError
from chalicelib.core.poison import DeadLetterSink
from chalicelib.core.queues import Message
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import ConditionFailed, ConflictError, condition_item, translated
from chalicelib.core.timebuckets import Bucket
from chalicelib.views import catalog, markers, rollup, top_store, windows
from chalicelib.views import layout as view_layout
from chalicelib.views import messages as view_messages
from chalicelib.views import validation as view_input

MAX_UPDATE_VIEWS = 50  # one update's condition names each token: well under the 4 KB expression limit
MAX_ROUNDS = 12  # updates of one URL's counter in one batch (failed conditions, spills, conflicts)
MAX_BACKOFFS = 6

__all__ = ["BatchIncompleteError", "Pending", "ViewMessages", "apply_messages"]


@dataclass
class Pending:
    """One distinct view of a batch and the messages that carry it."""

    sk: str  # its marker's name (chalicelib.views.layout.marker_sk)
    messages: list[Message]
    url: str  # kept on the URL's counter item (GET /views/urls)
    time_ms: int  # counted in the buckets of this time (a client-day: its earliest view's)
    spans: tuple[Bucket, ...]  # the hour bucket of that time, unless expired already

    @property
    def pk(self) -> str:
        return view_layout.url_pk(self.url)

    @functools.cached_property
    def marked(self) -> markers.Marked:
        minute = self.time_ms // windows.MINUTE_MS if self.spans else None
        return markers.Marked(markers.token(self.sk), markers.marker_day(self.time_ms), minute)


class ViewMessages(batch_processor.Capability[Message, Pending]):
    """The views queue for the batch processor: a message is one view, known counted by its marker
    (docs/design.md, "Exactly once"); the handler deletes what it applied itself (core.queues)."""

    partial = True

    def __init__(self, dynamodb: DynamoDB, sqs: SQS, settings: Settings, now_ms: int, sleep: Sleep | None) -> None:
        self.dynamodb, self.sqs, self.settings, self.now_ms, self.sleep = dynamodb, sqs, settings, now_ms, sleep
        self.table = settings.counts_table
        # Each URL's counter as last read or written by this batch, and the `ks` (spills) its
        # views' spilled marker items were read at.
        self._counters: dict[str, dict[str, Any] | None] = {}
        self._stored_at: dict[str, int | None] = {}

    @functools.cached_property
    def sink(self) -> DeadLetterSink:
        return DeadLetterSink(self.sqs, self.settings.views_queue, self.sleep)

    def parse(self, raw: Message) -> list[Pending]:
        view = view_messages.from_message(raw.body)
        view_input.check_time(view, self.now_ms, self.settings.view_horizon_seconds, None, "message")
        sk = view_layout.marker_sk(view, self.settings.view_dedup)
        return [Pending(sk, [raw], view.url, view.time_ms, _live_spans(self.settings, view.time_ms, self.now_ms))]

    def key(self, record: Pending) -> tuple[str, str]:
        return record.pk, record.sk

    def combine(self, kept: Pending, again: Pending) -> Pending:
        time_ms = min(kept.time_ms, again.time_ms)
        spans = _live_spans(self.settings, time_ms, self.now_ms)
        return Pending(kept.sk, kept.messages + again.messages, kept.url, time_ms, spans)

    def checks(self, records: list[Pending]) -> list[Write[Pending]]:
        return [Write(records, self._known), Write((), functools.partial(self._catalog, {p.pk for p in records}))]

    def _known(self, records: list[Pending]) -> Sent[Pending]:
        """Read the counters; the views they or their spilled marker items hold (docs/design.md, "Exactly once")."""
        pks = sorted({p.pk for p in records})
        keys = [view_layout.counter_key_of(pk) for pk in pks]
        items = attributes.by_key(self._read(keys, "could not read the view counters"))
        self._counters = {pk: items.get((pk, view_layout.COUNTER_SK)) for pk in pks}
        days = {pk: markers.inline(counter) for pk, counter in self._counters.items()}
        held = [p for p in records if markers.holds(days[p.pk], p.marked)]
        ids = {id(p) for p in held}
        return Sent(found=held + self._stored([p for p in records if id(p) not in ids]))

    def _stored(self, records: list[Pending]) -> list[Pending]:
        """The views among `records` whose marker is in a live spilled item (docs/design.md, "Exactly once")."""
        for p in records:
            self._stored_at[p.pk] = markers.spills(self._counters.get(p.pk))
        wanted = {(p.pk, markers.spilled_sk(p.marked.token)): p for p in records if self._stored_at[p.pk] is not None}
        keys = [{"pk": {"S": pk}, "sk": {"S": sk}} for pk, sk in wanted]
        items = self._read(keys, "could not read the view markers", "pk, sk, expires_at")
        now_s = self.now_ms // 1000
        return [wanted[attributes.key_of(item)] for item in items if attributes.integer(item, "expires_at") > now_s]

    def _read(
        self, keys: list[dict[str, Any]], failure: str, projection: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Items read strongly consistent (after every earlier count), with the batch's backoff."""
        return dynamo.batch_get_items(
            self.dynamodb,
            self.table,
            keys,
            failure,
            self.sleep,
            attempts=MAX_BACKOFFS,
            cap=1.0,
            projection=projection,
            consistent=True,
        )

    def _catalog(self, urls: set[str], _: list[Pending]) -> Sent[Pending]:
        known = {pk: self._counters[pk] for pk in urls if pk in self._counters}
        catalog.record(self.dynamodb, self.settings, urls, self.now_ms, self.sleep, known)  # GET /views/urls
        return Sent()

    def writes(self, records: list[Pending]) -> list[Write[Pending]]:
        groups: dict[str, list[Pending]] = defaultdict(list)
        for pending in sorted(records, key=lambda p: (p.time_ms, p.sk)):
            groups[pending.pk].append(pending)
        return [
            Write(group[start : start + MAX_UPDATE_VIEWS], self._count)
            for _, group in sorted(groups.items())
            for start in range(0, len(group), MAX_UPDATE_VIEWS)
        ]

    def _count(self, members: list[Pending]) -> Sent[Pending]:
        """Count views of one URL with one UpdateItem of its counter (docs/design.md, "Exactly once")."""
        pk, url = members[0].pk, members[0].url
        counter = self._counters.get(pk)
        pending, found = list(members), list[Pending]()
        calls = retries = 0
        names = {"last_counted": catalog.LAST_COUNTED, "listed": catalog.LISTED}
        for _ in range(MAX_ROUNDS):
            self._counters[pk] = counter  # what _stored and the batch's later reads take
            days = markers.inline(counter)
            held = {id(p): p for p in pending if markers.holds(days, p.marked)}
            if pk in self._stored_at and self._stored_at[pk] != markers.spills(counter):
                held.update((id(p), p) for p in self._stored([p for p in pending if id(p) not in held]))
            found += held.values()
            pending = [p for p in pending if id(p) not in held]
            if not pending:
                return Sent(found=found, calls=calls, retries=retries)
            marked = [p.marked for p in pending]
            size = markers.size_after(counter, pk, url, marked, self.now_ms, **names)
            calls += 1
            if counter is not None and markers.spill_pays(counter, size):
                counter = self._spill(pk, counter)
                continue
            horizon_s = self.settings.view_horizon_seconds
            request = markers.count_request(self.table, pk, url, counter, marked, self.now_ms, horizon_s, **names)
            try:
                with translated("could not count views"):
                    response = self.dynamodb.update_item(**request)
            except ConditionFailed as failed:  # counted or spilled into meanwhile: see what is there
                counter = condition_item(self.dynamodb, self.table, request["Key"], failed)
                continue
            except ConflictError:  # a move of its pending minutes (a transaction) holds the counter
                if retries >= MAX_BACKOFFS:
                    raise
                retry.pause(retries, self.sleep)
                retries += 1
                continue
            self._counters[pk] = response["Attributes"]
            return Sent(applied=pending, found=found, calls=calls, retries=retries)
        raise StorageError("a URL's view counter kept changing while its views were counted")

    def _spill(self, pk: str, counter: dict[str, Any]) -> dict[str, Any] | None:
        """Move the counter's inline markers to items of their own; the counter after (or as a
        failed condition found it: another spill came first)."""
        plan = markers.spill(self.table, pk, counter, self.settings.view_horizon_seconds, self.now_ms)
        if plan is None:
            return counter
        dynamo.put_items(self.dynamodb, self.table, plan.items, "could not move view markers", self.sleep)
        try:
            with translated("could not move view markers"):
                response = self.dynamodb.update_item(**plan.update)
        except ConditionFailed as failed:
            return condition_item(self.dynamodb, self.table, plan.update["Key"], failed)
        after = response["Attributes"]
        if self._stored_at.get(pk, markers.spills(counter)) == markers.spills(counter):
            # The tokens moved were all in the counter as read, so the views still pending, which
            # were not, have the spilled items they had.
            self._stored_at[pk] = markers.spills(after)
        return dict(after)

    def follow_ups(self, outcome: batch_processor.Outcome[Message, Pending]) -> list[Write[Pending]]:
        return [Write(outcome.settled() + outcome.checked, self._settle)]

    def _settle(self, members: list[Pending]) -> Sent[Pending]:
        """Move the pending minutes of the URLs of every view counted now or before and bring the
        top URLs' summaries up to the counts read (a failure brings back every view it was for)."""
        touched = {(p.pk, span) for p in members for span in p.spans}
        moves, observed = rollup.settle(self.dynamodb, self.settings, touched, self.now_ms, self.sleep, self._counters)
        summaries = top_store.record(self.dynamodb, self.settings, observed, self.now_ms, self.sleep)
        return Sent(details=Counter(bucket_moves=moves, top_writes=summaries))

    def acknowledge(self, done: Sequence[Message]) -> None:
        queue = queues.queue_url(self.sqs, self.settings.views_queue)
        queues.delete(self.sqs, queue, [m.receipt_handle for m in done], self.sleep)


def apply_messages(
    dynamodb: DynamoDB, sqs: SQS, settings: Settings, messages: list[Message], now_ms: int, sleep: Sleep | None = None
) -> BatchResult:
    """Count a batch (docs/design.md, "Partial failure and poison": BatchIncompleteError)."""
    return batch_processor.process(ViewMessages(dynamodb, sqs, settings, now_ms, sleep), messages)


def _live_spans(settings: Settings, time_ms: int, now_ms: int) -> tuple[Bucket, ...]:
    """The hour bucket a view is counted in; none when expired (docs/design.md, "Retention")."""
    minute = time_ms // windows.MINUTE_MS
    return (Bucket("hour", minute // 60),) if rollup.live_minute(settings, minute, now_ms) else ()
