"""SQS's message size limits, as AWS documents them, where moto measures differently.

AWS (SQS API Reference, SendMessage, SendMessageBatch and SetQueueAttributes): a message is at
most the queue's MaximumMessageSize (1 MiB, 1,048,576 bytes, by default and at most), "All parts
of the message attribute, including Name, Type, and Value, are part of the message size
restriction", and a batch's messages together are at most 1 MiB. moto (5.x) compares the
body's length in characters, not bytes, and leaves the attributes out: a body of multi-byte
characters, or a body near the limit with attributes, passes moto and fails on AWS. This patch
measures as AWS does (UTF-8 bytes of the body, plus each attribute's name, type and value)
before moto's own checks run. Used by the local stack and the tests; never deployed.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

BATCH_LIMIT_BYTES = 1_048_576  # "the maximum total payload size ... 1 MiB 1,048,576 bytes"
_installed = False


def message_size(body: str, attributes: Mapping[str, Any] | None = None) -> int:
    """The size SQS holds against its limits: body and message attributes, in bytes."""
    size = len(body.encode("utf-8"))
    for name, value in (attributes or {}).items():
        size += len(name.encode("utf-8")) + len(str(value.get("DataType", "")).encode("utf-8"))
        if value.get("StringValue") is not None:
            size += len(str(value["StringValue"]).encode("utf-8"))
        if value.get("BinaryValue") is not None:
            size += len(_binary(value["BinaryValue"]))
    return size


def _binary(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    try:  # the query and JSON protocols carry binary values base64-encoded
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError):
        return str(value).encode("utf-8")


def install() -> None:
    """Patch moto's SQS backend (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    from moto.sqs.exceptions import BatchRequestTooLong, InvalidParameterValue
    from moto.sqs.models import SQSBackend

    original_send, original_batch = SQSBackend.send_message, SQSBackend.send_message_batch

    def check(queue: Any, body: str, attributes: Mapping[str, Any] | None) -> None:
        limit = int(queue.maximum_message_size)
        if message_size(body, attributes) > limit:
            raise InvalidParameterValue(
                f"One or more parameters are invalid. Reason: Message must be shorter than {limit} bytes."
            )

    def send_message(self: Any, queue_name: str, message_body: str, *args: Any, **kwargs: Any) -> Any:
        attributes = kwargs.get("message_attributes", args[0] if args else None)
        check(self.get_queue(queue_name), message_body, attributes)
        return original_send(self, queue_name, message_body, *args, **kwargs)

    def send_message_batch(self: Any, queue_name: str, entries: dict[str, dict[str, Any]]) -> Any:
        # The whole request is refused before any message is queued, as moto does for its own checks.
        total = sum(message_size(e["MessageBody"], e.get("MessageAttributes")) for e in entries.values())
        if total > BATCH_LIMIT_BYTES:
            raise BatchRequestTooLong(total)
        queue = self.get_queue(queue_name)
        for entry in entries.values():
            check(queue, entry["MessageBody"], entry.get("MessageAttributes"))
        return original_batch(self, queue_name, entries)

    SQSBackend.send_message = send_message  # type: ignore[method-assign]
    SQSBackend.send_message_batch = send_message_batch  # type: ignore[method-assign]
