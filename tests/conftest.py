"""Shared fixtures: fake credentials, moto, the app wired to it, and a clock tests can move."""

from __future__ import annotations

import functools
import json
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

from tools import gateway, lambda_limits, moto_patches, sqs_limits  # noqa: E402

moto_patches.install()
sqs_limits.install()  # SQS's message sizes measured as AWS measures them (tools/sqs_limits.py)
gateway.install()  # Chalice's local gateway answers 401/403/404 as API Gateway does (tools/gateway.py)
lambda_limits.install()  # and applies API Gateway's and Lambda's payload limits and timeouts

# The item key the tests' stage holds (tools/resources.ensure_secrets), so expected unique counts
# can be computed from the same keyed hashes the app stores.
ITEM_KEY = "test-item-key-" + "0123456789abcdef" * 4


def _one_botocore_loader() -> None:
    """Every boto3 session a test process creates reads botocore's models and endpoint data
    through one loader, so each JSON file is parsed once per run. The app makes a session per
    client (chalicelib/core/aws.py) and every test gets new clients: parsing them afresh cost
    about 0.4 s of CPU per test, more than most tests take. The files and the clients made from
    them are the same; the loader caches per instance what it would have read again."""
    import boto3
    import botocore.loaders
    import botocore.session

    class OneLoader(botocore.loaders.Loader):
        @property
        def search_paths(self) -> list[str]:
            # boto3.Session appends its data path on every session: a copy keeps the shared
            # list from growing (the path is in it from the start).
            return list(super().search_paths)

    @functools.cache
    def create_loader(search_path_string: str | None = None) -> OneLoader:
        paths = search_path_string.split(os.pathsep) if search_path_string else []
        return OneLoader(extra_search_paths=[*paths, os.path.join(os.path.dirname(boto3.__file__), "data")])

    botocore.session.create_loader = create_loader  # type: ignore[assignment]


_one_botocore_loader()


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


@functools.cache
def generated_policy() -> str:
    """The role policy tools/iam_policy.py generates for the tests' settings (as JSON: each
    test gets its own copy to narrow)."""
    from moto.core import DEFAULT_ACCOUNT_ID

    from chalicelib.core.settings import Settings
    from tools import iam_policy

    settings = Settings.from_env({})
    policy = iam_policy.for_settings(
        settings, stage_name="tests", region=settings.aws_region, account=DEFAULT_ACCOUNT_ID
    )
    return json.dumps(policy)


@pytest.fixture
def role() -> Any:
    """The app's IAM role (tools/iam_enforcement.Role) with the generated policy; a test may
    narrow `role.policy` to see a call refused."""
    from moto.core import DEFAULT_ACCOUNT_ID

    from tools.iam_enforcement import Role

    return Role(json.loads(generated_policy()), account=DEFAULT_ACCOUNT_ID)


@pytest.fixture
def aws(role: Any) -> Iterator[Any]:
    """moto in-process with every resource the app needs; yields AwsClients for it. Every call
    app.py or chalicelib makes with them is judged against the generated role policy and refused
    as AWS would (tools/iam_enforcement.py); what a test calls on them itself is not."""
    from moto import mock_aws

    from chalicelib.core.aws import AwsClients
    from chalicelib.core.settings import Settings
    from tools import iam_enforcement, resources

    with mock_aws():
        settings = Settings.from_env({})
        clients = AwsClients(settings)
        resources.ensure(
            clients.dynamodb, clients.sqs, clients.s3, resources.for_settings(settings), settings.aws_region
        )
        resources.ensure_secrets(clients.secretsmanager, resources.for_settings(settings), ITEM_KEY)
        iam_enforcement.guard(clients, role, iam_enforcement.deployed_code_calls)
        yield clients


@pytest.fixture
def app_module(aws: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    import app as app_module

    monkeypatch.setattr(app_module, "aws", aws)
    return app_module


class KeyedHTTP:
    """chalice.test's HTTP client sending `Authorization: Bearer <key>` (unless the request
    sets its own Authorization header). `with_key(other)` sends another key, `with_key(None)` none."""

    def __init__(self, http: Any, key: str | None) -> None:
        self._http = http
        self.key = key

    def with_key(self, key: str | None) -> KeyedHTTP:
        return KeyedHTTP(self._http, key)

    def request(self, method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b"") -> Any:
        headers = dict(headers or {})
        if self.key is not None and not any(name.lower() == "authorization" for name in headers):
            headers["Authorization"] = f"Bearer {self.key}"
        return self._http.request(method, path, headers=headers, body=body)

    def get(self, path: str, **kwargs: Any) -> Any:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> Any:
        return self.request("POST", path, **kwargs)

    def put(self, path: str, **kwargs: Any) -> Any:
        return self.request("PUT", path, **kwargs)

    def patch(self, path: str, **kwargs: Any) -> Any:
        return self.request("PATCH", path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Any:
        return self.request("DELETE", path, **kwargs)

    def options(self, path: str, **kwargs: Any) -> Any:
        return self.request("OPTIONS", path, **kwargs)

    def head(self, path: str, **kwargs: Any) -> Any:
        return self.request("HEAD", path, **kwargs)


class KeyedClient:
    """chalice.test.Client whose `http` sends the admin key by default (see KeyedHTTP)."""

    def __init__(self, client: Any, admin_key: str) -> None:
        self._client = client
        self.admin_key = admin_key
        self.http = KeyedHTTP(client.http, admin_key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def create_key(aws: Any, scopes: list[str], **limits: Any) -> str:
    """A stored key (plain text) with these scopes and optional prefix, origins, sites, note and
    rate_per_second: the highest rate unless given (tests under a stopped clock send many requests
    in one of its seconds; the tests of the limit give the rate they check)."""
    from chalicelib.access import policy
    from chalicelib.access import store as key_store
    from chalicelib.core.settings import Settings

    limits.setdefault("rate_per_second", policy.RATE_MAX)
    new = policy.parse_new_key({"scopes": scopes, **limits})
    key, _ = key_store.create(aws.dynamodb, Settings.from_env({}), new, 1_795_000_000_000)
    return key


@pytest.fixture
def client(app_module: Any, aws: Any) -> Iterator[KeyedClient]:
    """The app over chalice.test, authorised as an admin: `client.http.with_key(k)` sends
    another key, `with_key(None)` none; `client.admin_key` is the key."""
    from chalice.test import Client

    with Client(app_module.app) as test_client:
        yield KeyedClient(test_client, create_key(aws, ["admin"], note="tests"))


# Property tests run on shared, busy machines: judge them on their examples, not on time.
from hypothesis import settings as hypothesis_settings  # noqa: E402

hypothesis_settings.register_profile("tally", deadline=None)
hypothesis_settings.load_profile("tally")
