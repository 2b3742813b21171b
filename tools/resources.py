"""The AWS resources Tally needs besides what Chalice creates, defined once.

The local stack creates them in the emulator from this definition; provisioning for AWS
uses the same definition, so the two cannot drift apart.
"""

from __future__ import annotations

import json
import secrets
import string
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from chalicelib.core.settings import DEAD_LETTER_RETENTION_SECONDS, Settings

DLQ_RETENTION_SECONDS = DEAD_LETTER_RETENTION_SECONDS  # SQS's maximum: time to look at what failed
# Every table: string partition key pk, string sort key sk, on-demand billing.
KEY_SCHEMA = [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]
KEY_ATTRIBUTES = [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}]
STREAM_VIEW = "NEW_IMAGE"


@dataclass(frozen=True)
class Table:
    name: str
    stream: bool  # NEW_IMAGE stream feeding a handler
    ttl_attribute: str = "expires_at"


@dataclass(frozen=True)
class Queue:
    name: str
    visibility_timeout: int
    dead_letter_queue: str
    max_receive_count: int = 5
    # MessageRetentionPeriod, set explicitly: the views horizon is derived from it (core.settings).
    retention_seconds: int = 4 * 86400
    consumer: str = ""  # the app.py handler fed by this queue (its Lambda timeout bounds visibility)
    # The consumer sets poison aside in the dead-letter queue itself (core.poison.DeadLetterSink)
    # and GET /quarantine/counts reads its depth (core.quarantine): the role needs rights on it.
    dead_letter_written: bool = False


@dataclass(frozen=True)
class Resources:
    tables: tuple[Table, ...]
    queues: tuple[Queue, ...]
    buckets: tuple[str, ...]
    # Where Lambda describes a stream batch it gave up on (the events stream mapping's
    # on-failure destination, tools/mappings.py); nothing consumes it, an alarm watches it.
    failure_queues: tuple[str, ...] = ()
    # Secrets Manager secrets the functions read (the item key: docs/tracker.md, "What is stored").
    secrets: tuple[str, ...] = ()


def stream_failures_queue(settings: Settings) -> str:
    return f"{settings.events_table}-stream-failures"


def for_settings(settings: Settings) -> Resources:
    return Resources(
        tables=(Table(settings.events_table, stream=True), Table(settings.counts_table, stream=False)),
        queues=(
            # Visibility timeout >= 6x the consumer's Lambda timeout (AWS's advice for SQS sources).
            Queue(
                settings.views_queue,
                visibility_timeout=360,
                dead_letter_queue=f"{settings.views_queue}-dlq",
                consumer="on_view_messages",
                retention_seconds=settings.views_queue_retention_seconds,
                dead_letter_written=True,
            ),
            Queue(
                settings.uniques_queue,
                visibility_timeout=720,
                dead_letter_queue=f"{settings.uniques_queue}-dlq",
                consumer="on_unique_items",
            ),
        ),
        buckets=(settings.reports_bucket,),
        failure_queues=(stream_failures_queue(settings),),
        secrets=(settings.item_key_secret,),
    )


# A new item key: 64 random letters and digits (~380 bits), more than HMAC-SHA256 can use.
SECRET_LENGTH = 64


def ensure_secrets(secretsmanager: Any, resources: Resources, value: str | None = None) -> dict[str, str]:
    """Create each missing secret with a random value (or `value`); an existing one is kept, since
    replacing the item key would make every stored item hash unmatchable by new ones."""
    outputs: dict[str, str] = {}
    for name in resources.secrets:
        try:
            outputs[name] = secretsmanager.describe_secret(SecretId=name)["ARN"]
            continue
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ResourceNotFoundException":
                raise
        secret = value if value is not None else new_secret_value()
        outputs[name] = secretsmanager.create_secret(Name=name, SecretString=secret)["ARN"]
    return outputs


def new_secret_value() -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(SECRET_LENGTH))


def remove_secrets(secretsmanager: Any, resources: Resources) -> list[str]:
    deleted: list[str] = []
    for name in resources.secrets:
        try:
            secretsmanager.delete_secret(SecretId=name, ForceDeleteWithoutRecovery=True)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ResourceNotFoundException":
                raise
            continue
        deleted.append(name)
    return deleted


def ensure(dynamodb: Any, sqs: Any, s3: Any, resources: Resources, region: str) -> dict[str, str]:
    """Create whatever is missing (idempotent); returns names to ARNs/URLs worth exporting."""
    outputs: dict[str, str] = {}
    for table in resources.tables:
        outputs[table.name] = _ensure_table(dynamodb, table)
    for queue in resources.queues:
        dlq_url = _ensure_queue(sqs, queue.dead_letter_queue, {"MessageRetentionPeriod": str(DLQ_RETENTION_SECONDS)})
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        outputs[queue.name] = _ensure_queue(
            sqs,
            queue.name,
            {
                "VisibilityTimeout": str(queue.visibility_timeout),
                "MessageRetentionPeriod": str(queue.retention_seconds),
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": queue.max_receive_count}
                ),
            },
        )
        outputs[queue.dead_letter_queue] = dlq_url
    for name in resources.failure_queues:
        outputs[name] = _ensure_queue(sqs, name, {"MessageRetentionPeriod": str(DLQ_RETENTION_SECONDS)})
    for bucket in resources.buckets:
        try:
            if region == "us-east-1":
                s3.create_bucket(Bucket=bucket)
            else:
                s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": region})
        except ClientError as exc:
            if exc.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise
        outputs[bucket] = f"arn:aws:s3:::{bucket}"
    return outputs


def _ensure_table(dynamodb: Any, table: Table) -> str:
    spec: dict[str, Any] = {
        "TableName": table.name,
        "KeySchema": KEY_SCHEMA,
        "AttributeDefinitions": KEY_ATTRIBUTES,
        "BillingMode": "PAY_PER_REQUEST",
    }
    if table.stream:
        spec["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": STREAM_VIEW}
    try:
        dynamodb.create_table(**spec)
        dynamodb.get_waiter("table_exists").wait(TableName=table.name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ResourceInUseException":
            raise
    ttl = dynamodb.describe_time_to_live(TableName=table.name)["TimeToLiveDescription"]
    if ttl.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING"):
        dynamodb.update_time_to_live(
            TableName=table.name, TimeToLiveSpecification={"Enabled": True, "AttributeName": table.ttl_attribute}
        )
    description = dynamodb.describe_table(TableName=table.name)["Table"]
    return description.get("LatestStreamArn") or description["TableArn"]


def _ensure_queue(sqs: Any, name: str, attributes: dict[str, str]) -> str:
    try:
        url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    except ClientError as exc:
        if exc.response["Error"]["Code"] not in ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"):
            raise
        return sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes=attributes)
    return url


def remove(dynamodb: Any, sqs: Any, s3: Any, resources: Resources) -> list[str]:
    """Delete what ensure() creates, emptying the buckets first; returns the names deleted."""
    deleted: list[str] = []
    for table in resources.tables:
        try:
            dynamodb.delete_table(TableName=table.name)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ResourceNotFoundException":
                raise
            continue
        dynamodb.get_waiter("table_not_exists").wait(TableName=table.name, WaiterConfig={"Delay": 2, "MaxAttempts": 60})
        deleted.append(table.name)
    queue_names = [n for queue in resources.queues for n in (queue.name, queue.dead_letter_queue)]
    for name in queue_names + list(resources.failure_queues):
        try:
            sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName=name)["QueueUrl"])
        except ClientError as exc:
            if exc.response["Error"]["Code"] not in ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"):
                raise
            continue
        deleted.append(name)
    for bucket in resources.buckets:
        try:
            for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
                doomed = [
                    {"Key": o["Key"], "VersionId": o["VersionId"]}
                    for o in page.get("Versions", []) + page.get("DeleteMarkers", [])
                ]
                if doomed:
                    s3.delete_objects(Bucket=bucket, Delete={"Objects": doomed, "Quiet": True})
            s3.delete_bucket(Bucket=bucket)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "NoSuchBucket":
                raise
            continue
        deleted.append(bucket)
    return deleted
