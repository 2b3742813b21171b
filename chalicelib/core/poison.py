"""Where a background handler's poison goes, the two sinks of core.batch_processor: docs/design.md, "One way for
each mechanism" ("Where poison goes")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from chalicelib.core import quarantine, queues
from chalicelib.core.aws import SQS, DynamoDB
from chalicelib.core.batch_processor import Poison
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import reason
from chalicelib.core.settings import Settings

S = TypeVar("S")

REASON_MAX_CHARS = 1000


@dataclass(frozen=True)
class QuarantineSink(Generic[S]):
    """Each poison record as one quarantine item of `source`, keyed by its id, with its reason."""

    dynamodb: DynamoDB
    settings: Settings
    source: str
    record_id: Callable[[S], str]  # the record's id (the item's sort key)
    text: Callable[[S], str]  # the record as stored
    now_ms: int

    def put(self, poison: Sequence[Poison[S]]) -> Counter[str]:
        for p in poison:
            quarantine.put(
                self.dynamodb,
                self.settings,
                self.source,
                self.record_id(p.raw),
                self.text(p.raw),
                reason(p.exception),
                self.now_ms,
            )
        return Counter()


@dataclass(frozen=True)
class DeadLetterSink:
    """Each poison message sent to `queue`'s dead-letter queue as it came, with its reason."""

    sqs: SQS
    queue: str
    sleep: Sleep | None = None

    def record_id(self, raw: queues.Message) -> str:
        return raw.message_id

    def put(self, poison: Sequence[Poison[queues.Message]]) -> Counter[str]:
        entries: list[dict[str, Any]] = []
        for i, p in enumerate(poison):
            texts = {
                "reason": reason(p.exception)[:REASON_MAX_CHARS],
                "source_message_id": p.raw.message_id or "unknown",
            }
            attributes = {
                name: {"DataType": "String", "StringValue": queues.sendable(text)} for name, text in texts.items()
            }
            body = queues.sendable(p.raw.body) or "(empty)"
            entries.append({"Id": str(i), "MessageBody": body, "MessageAttributes": attributes})
        queues.send(self.sqs, queues.dead_letter_url(self.sqs, self.queue), entries, self.sleep)
        return Counter(dead_lettered=len(poison))
