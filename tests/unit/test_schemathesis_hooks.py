"""The Schemathesis hook that keeps a run from revoking its own keys (tests/schemathesis_hooks.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from chalicelib.access import api_keys
from tests import schemathesis_hooks

ADMIN, BEACON = "tly_admin-of-the-run", "tly_beacon-of-the-run"


def own_id(key: str) -> str:
    return api_keys.key_id(api_keys.digest(key))


@pytest.fixture(autouse=True)
def run_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", ADMIN)
    monkeypatch.setenv("TALLY_BEACON_KEY", BEACON)


def call(method: str, key_id: str) -> str:
    case: Any = SimpleNamespace(method=method, path_parameters={"key_id": key_id})
    schemathesis_hooks.before_call(None, case)
    return str(case.path_parameters["key_id"])


@pytest.mark.parametrize("key", [ADMIN, BEACON])
def test_given_a_drawn_delete_of_a_key_the_run_uses_when_called_then_an_unknown_id_instead(key: str) -> None:
    assert call("DELETE", own_id(key)) == "0" * 16


def test_given_a_delete_of_another_key_or_another_method_when_called_then_unchanged() -> None:
    other = own_id("tly_created-by-the-run")
    assert call("DELETE", other) == other
    assert call("GET", own_id(ADMIN)) == own_id(ADMIN)
