"""SQS plumbing shared by queue producers and handlers: URLs, batched sends and deletes, and a queue's dead-letter
queue found from its redrive policy. Why a handler deletes messages itself: docs/design.md, "Background batches"."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from chalicelib.core import clock, retry
from chalicelib.core.aws import SQS
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import StorageError
from chalicelib.core.storage_errors import translated

MAX_ENTRIES = 10  # SendMessageBatch / DeleteMessageBatch limit
_ATTEMPTS = 5
# Characters SQS refuses in a message (its allowed set is #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD
# #x10000-#x10FFFF): lone surrogates and most control characters.
_UNSENDABLE = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True)
class Message:
    message_id: str
    receipt_handle: str
    body: str


def from_lambda_event(event: dict[str, Any]) -> list[Message]:
    fields = ("messageId", "receiptHandle", "body")  # Message's, in its order
    return [Message(*(str(record.get(name, "")) for name in fields)) for record in event.get("Records", [])]


def sendable(text: str) -> str:
    """`text` with every character SQS refuses written as a \\uXXXX escape, so a poison record
    can always be set aside as it came."""
    return _UNSENDABLE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


@functools.lru_cache(maxsize=64)
def queue_url(sqs: SQS, name: str) -> str:
    with translated(f"queue {name} cannot be found"):
        return str(sqs.get_queue_url(QueueName=name)["QueueUrl"])


@functools.lru_cache(maxsize=64)
def dead_letter_url(sqs: SQS, name: str) -> str:
    failure = f"queue {name} has no dead-letter queue"
    with translated(failure):
        attributes = sqs.get_queue_attributes(QueueUrl=queue_url(sqs, name), AttributeNames=["RedrivePolicy"])
    try:
        target_arn = json.loads(attributes["Attributes"]["RedrivePolicy"])["deadLetterTargetArn"]
    except (KeyError, ValueError) as exc:
        raise StorageError(failure) from exc
    return queue_url(sqs, target_arn.rsplit(":", 1)[1])


def send(sqs: SQS, url: str, entries: Sequence[dict[str, Any]], sleep: Sleep | None = None) -> None:
    """SendMessageBatch in groups of ten, retrying the entries that failed; entries need "Id"."""
    _batched(sqs.send_message_batch, url, list(entries), sleep or clock.sleep, "messages could not be queued")


def delete(sqs: SQS, url: str, receipt_handles: Sequence[str], sleep: Sleep | None = None) -> None:
    entries = [{"Id": str(i), "ReceiptHandle": handle} for i, handle in enumerate(receipt_handles)]
    _batched(sqs.delete_message_batch, url, entries, sleep or clock.sleep, "messages could not be deleted")


def _batched(call: Callable[..., Any], url: str, entries: list[dict[str, Any]], sleep: Sleep, failure: str) -> None:
    def send(pending: list[dict[str, Any]]) -> list[dict[str, Any]]:
        failed = {f["Id"] for f in call(QueueUrl=url, Entries=pending).get("Failed", [])}
        return [e for e in pending if e["Id"] in failed]

    for start in range(0, len(entries), MAX_ENTRIES):
        retry.until_done(send, entries[start : start + MAX_ENTRIES], failure, _ATTEMPTS, sleep, cap=1.0)
