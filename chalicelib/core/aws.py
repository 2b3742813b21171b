"""AWS clients, the only place boto3 clients are made (AWS_ENDPOINT_URL points them at a local emulator):
docs/design.md, "One way for each mechanism" ("AWS clients")."""

from __future__ import annotations

import threading
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from chalicelib.core.errors import StorageError
from chalicelib.core.settings import Settings

__all__ = ["S3", "SQS", "AwsClients", "DynamoDB", "SecretsManager"]

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient as DynamoDB
    from mypy_boto3_s3 import S3Client as S3
    from mypy_boto3_sqs import SQSClient as SQS
else:
    DynamoDB = SQS = S3 = Any
# No Secrets Manager stubs are installed: its one call (GetSecretValue) is typed by hand below.
SecretsManager = Any

# The item key's shortest accepted length: HMAC-SHA256's output, so the key is not the weak part.
MIN_ITEM_KEY_BYTES = 32

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

    @cached_property
    def secretsmanager(self) -> SecretsManager:
        return cast("SecretsManager", self._client("secretsmanager"))

    @cached_property
    def item_key(self) -> bytes:
        """The stage's key for item hashes, read once per process from the secret the settings
        name; it is never stored in a table (docs/tracker.md, "What is stored")."""
        try:
            value: str = self.secretsmanager.get_secret_value(SecretId=self._settings.item_key_secret)["SecretString"]
        except ClientError as exc:
            raise StorageError("could not read the item key") from exc
        key = value.encode("utf-8")
        if len(key) < MIN_ITEM_KEY_BYTES:
            raise StorageError(f"the item key must be at least {MIN_ITEM_KEY_BYTES} bytes")
        return key
