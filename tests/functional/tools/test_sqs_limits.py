"""SQS's documented message sizes, on moto with tools/sqs_limits.py (installed by tests/conftest.py):
1 MiB per message counting its bytes and its attributes, 1 MiB per batch, each edge both sides."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from tools.sqs_limits import BATCH_LIMIT_BYTES, message_size

MIB = 1_048_576


@pytest.fixture
def queue() -> Iterator[tuple[Any, str]]:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        yield sqs, sqs.create_queue(QueueName="sizes")["QueueUrl"]


def refused(call: Any, **kwargs: Any) -> str:
    with pytest.raises(ClientError) as caught:
        call(**kwargs)
    return str(caught.value.response["Error"]["Code"])


def queued(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def test_given_the_queues_default_then_its_maximum_message_size_is_1_mib(queue: tuple[Any, str]) -> None:
    sqs, url = queue

    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MaximumMessageSize"])["Attributes"]

    assert int(attributes["MaximumMessageSize"]) == MIB == BATCH_LIMIT_BYTES


def test_given_a_body_of_1_mib_then_sent_and_one_byte_more_refused(queue: tuple[Any, str]) -> None:
    sqs, url = queue

    sqs.send_message(QueueUrl=url, MessageBody="x" * MIB)
    code = refused(sqs.send_message, QueueUrl=url, MessageBody="x" * (MIB + 1))

    assert "InvalidParameterValue" in code
    assert queued(sqs, url) == 1


def test_given_multibyte_characters_then_the_limit_counts_bytes_not_characters(queue: tuple[Any, str]) -> None:
    """moto alone counts characters: half a million two-byte characters would pass it."""
    sqs, url = queue

    sqs.send_message(QueueUrl=url, MessageBody="é" * (MIB // 2))
    code = refused(sqs.send_message, QueueUrl=url, MessageBody="é" * (MIB // 2) + "x")

    assert "InvalidParameterValue" in code
    assert queued(sqs, url) == 1


def test_given_message_attributes_then_their_name_type_and_value_count_towards_the_limit(
    queue: tuple[Any, str],
) -> None:
    sqs, url = queue
    attribute = {"reason": {"DataType": "String", "StringValue": "poison"}}  # 6 + 6 + 6 bytes
    body = "x" * (MIB - 18)
    assert message_size(body, attribute) == MIB

    sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attribute)
    code = refused(sqs.send_message, QueueUrl=url, MessageBody=body + "x", MessageAttributes=attribute)

    assert "InvalidParameterValue" in code
    assert queued(sqs, url) == 1


def test_given_a_batch_of_1_mib_in_all_then_sent_and_one_byte_more_refused_whole(queue: tuple[Any, str]) -> None:
    sqs, url = queue
    half = MIB // 2

    sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "x" * half}, {"Id": "b", "MessageBody": "y" * half}]
    )
    code = refused(
        sqs.send_message_batch,
        QueueUrl=url,
        Entries=[{"Id": "a", "MessageBody": "x" * half}, {"Id": "b", "MessageBody": "é" * (half // 2) + "y"}],
    )

    assert "BatchRequestTooLong" in code
    assert queued(sqs, url) == 2
