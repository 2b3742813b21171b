"""AWS clients, created lazily and shared; the only place boto3 clients are made.

AWS_ENDPOINT_URL (a setting) points every client at a local emulator; on AWS it is unset.
"""

from __future__ import annotations

import threading
from functools import cached_property
from typing import Any

import boto3
from botocore.config import Config

from chalicelib.core.settings import Settings

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
    def dynamodb(self) -> Any:
        return self._client("dynamodb")

    @cached_property
    def sqs(self) -> Any:
        return self._client("sqs")

    @cached_property
    def s3(self) -> Any:
        return self._client("s3")
