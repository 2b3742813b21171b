"""Schemathesis over the whole document, in-process: the app behind Chalice's local gateway (as
a WSGI app), on moto, with the same configuration and hooks as the e2e run (tests/schemathesis.toml,
tests/schemathesis_hooks.py). Quick enough for every `make test`.

Only requests generated valid: each is accepted (positive_data_acceptance: no 400 for what the
document calls valid) and none answers a 5xx. The e2e run (tests/e2e/test_openapi_e2e.py) makes
every check over HTTP, invalid requests and the stateful links included.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import events

from chalicelib.contract import document
from tests.conftest import create_key

CONFIG = Path(__file__).resolve().parents[2] / "schemathesis.toml"
# The answers' shapes and the checks that resend a request are the e2e run's: over HTTP, as a
# client sees them (this WSGI bridge is not a client's view).
CHECKS = ("positive_data_acceptance", "not_a_server_error")
EXAMPLES = int(os.environ.get("TALLY_SCHEMATHESIS_INPROCESS_EXAMPLES", "10"))


class LocalGateway:
    """Chalice's local gateway (API Gateway as the tests play it: tools/gateway.py) as a WSGI app:
    the request's raw path and query go through as a client sent them."""

    def __init__(self, http: Any) -> None:
        self.http = http

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        path = environ.get("RAW_URI") or environ["PATH_INFO"]
        if environ.get("QUERY_STRING") and "?" not in path:
            path = f"{path}?{environ['QUERY_STRING']}"
        headers = {name[5:].replace("_", "-").title(): value for name, value in environ.items() if name[:5] == "HTTP_"}
        if environ.get("CONTENT_TYPE"):
            headers["Content-Type"] = environ["CONTENT_TYPE"]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        response = self.http.request(environ["REQUEST_METHOD"], path, headers=headers, body=body)
        start_response(f"{response.status_code} -", list(response.headers.items()))
        return [response.body if isinstance(response.body, bytes) else response.body.encode("utf-8")]


def failures(stream: Iterable[events.EngineEvent]) -> list[str]:
    found: list[str] = []
    for event in stream:
        if isinstance(event, events.ScenarioFinished):
            recorder = event.recorder
            for case_id, checks in recorder.checks.items():
                for check in checks:
                    if check.status.name != "FAILURE":
                        continue
                    case = recorder.cases[case_id].value
                    interaction = recorder.interactions.get(case_id)
                    answer = interaction.response if interaction else None
                    found.append(
                        f"{recorder.label} {check.name}: {answer.status_code if answer else '-'} "
                        f"{(answer.content or b'')[:300]!r} query={str(case.query)[:300]} "
                        f"path={case.path_parameters} body={str(case.body)[:300]}"
                    )
        elif isinstance(event, (events.NonFatalError, events.FatalError)):
            found.append(f"error: {event}")
    return found


def test_given_the_document_when_schemathesis_sends_valid_requests_in_process_then_each_is_accepted(
    client: Any, aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TALLY_ADMIN_KEY", client.admin_key)
    monkeypatch.setenv("TALLY_BEACON_KEY", create_key(aws, ["ingest"], note="schemathesis beacon key"))
    settings = tomllib.loads(CONFIG.read_text(encoding="utf-8"))
    settings.update(
        seed=1,
        workers=1,
        checks={"enabled": False, **{name: {"enabled": True} for name in CHECKS}},
        generation={"mode": "positive", "max-examples": EXAMPLES},
        phases={"stateful": {"enabled": False}},
    )
    schema = schemathesis.openapi.from_dict(
        json.loads(json.dumps(document.build())), config=SchemathesisConfig.from_dict(settings)
    )
    schema.app = LocalGateway(client.http.with_key(None))

    found = failures(schemathesis.engine.from_schema(schema).execute())

    assert found == [], "\n".join(found)
