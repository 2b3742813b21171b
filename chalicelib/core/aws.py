"""AWS clients, created lazily and shared; the only place boto3 clients are made.

AWS_ENDPOINT_URL (a setting) points every client at a local emulator; on AWS it is unset.
`DynamoDB`, `SQS` and `S3` are the clients' types for annotations: the boto3 stubs (a
development dependency, checked by mypy) where type checking runs, Any at run time, so the
Lambda package needs no stubs.
"""

from __future__ import annotations

import threading
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

import boto3
from botocore.config import Config

from chalicelib.core.settings import Settings

__all__ = ["S3", "SQS", "AwsClients", "DynamoDB"]

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient as DynamoDB
    from mypy_boto3_s3 import S3Client as S3
    from mypy_boto3_sqs import SQSClient as SQS
else:
    DynamoDB = SQS = S3 = Any

_RETRIES = Config(retries={"max_attempts": 5, "mode": "standard"})


class AwsClients:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._lock = threading.Lock()

    def _client(self, service: str) -> Any:
        # boto3's default session is not safe to create clients from concurrently.
        with self._lock:
            return boto3.session.Session().client(
                service,
                region_name=self._settings.aws_region,
                endpoint_url=self._settings.aws_endpoint_url,
                config=_RETRIES,
            )

    @cached_property
    def dynamodb(self) -> DynamoDB:
        return cast("DynamoDB", self._client("dynamodb"))

    @cached_property
    def sqs(self) -> SQS:
        return cast("SQS", self._client("sqs"))

    @cached_property
    def s3(self) -> S3:
        return cast("S3", self._client("s3"))
