"""Shared fixtures: fake credentials, moto, the app wired to it, and a clock tests can move."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

# Never reach AWS: fake credentials before anything creates a client.
for _key, _value in {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}.items():
    os.environ[_key] = _value
os.environ.pop("AWS_ENDPOINT_URL", None)
os.environ.pop("AWS_PROFILE", None)

from tools import moto_patches  # noqa: E402

moto_patches.install()


class Clock:
    """A settable clock in epoch milliseconds."""

    def __init__(self, now_ms: int) -> None:
        self.now = now_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    from chalicelib.core import clock as clock_module

    fake = Clock(1_795_000_000_000)  # 2026-11-18T...
    monkeypatch.setattr(clock_module, "now_ms", fake)
    return fake


@pytest.fixture(autouse=True)
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Retry pauses taken through core.clock, recorded instead of slept: no test really waits."""
    from chalicelib.core import clock as clock_module

    pauses: list[float] = []
    monkeypatch.setattr(clock_module, "sleep", pauses.append)
    return pauses


@pytest.fixture
def aws() -> Iterator[Any]:
    """moto in-process with every resource the app needs; yields AwsClients for it."""
    from moto import mock_aws

    from chalicelib.core.aws import AwsClients
    from chalicelib.core.settings import Settings
    from tools import resources

    with mock_aws():
        settings = Settings.from_env({})
        clients = AwsClients(settings)
        resources.ensure(
            clients.dynamodb, clients.sqs, clients.s3, resources.for_settings(settings), settings.aws_region
        )
        yield clients


@pytest.fixture
def app_module(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    import app as app_module

    monkeypatch.setattr(app_module, "aws", aws)
    return app_module


@pytest.fixture
def client(app_module: Any) -> Iterator[Any]:
    from chalice.test import Client

    with Client(app_module.app) as test_client:
        yield test_client


# Property tests run on shared, busy machines: judge them on their examples, not on time.
from hypothesis import settings as hypothesis_settings  # noqa: E402

hypothesis_settings.register_profile("tally", deadline=None)
hypothesis_settings.load_profile("tally")
