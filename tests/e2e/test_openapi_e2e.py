"""The contract against the running local stack: GET /openapi.json over HTTP, every method a
path lacks answered in Chalice's JSON shape, and Schemathesis over the whole API.

Schemathesis (a property-based API tester we did not write) reads the document the stack
serves and sends every operation its examples, boundary values (coverage), generated requests
valid and invalid (fuzzing) and chains along the document's links (stateful: create a key, use
it, revoke it). TALLY_SCHEMATHESIS_EXAMPLES bounds the generated requests per operation (10 in
`make test`; `make fuzz` runs more). The checks (tests/schemathesis.toml), and why the others are
left out:

- not_a_server_error, status_code_conformance, content_type_conformance,
  response_headers_conformance, response_schema_conformance: every answer is one the document
  names, in its shape;
- negative_data_rejection: input the document calls invalid is refused (4xx);
- positive_data_acceptance: input the document calls valid is not refused with a 400, on every
  operation but the three whose events' attributes and values the document does not bound yet
  (tests/schemathesis.toml). What the document cannot state (times relative to now, opaque
  cursors, relations between two parameters) is fitted to valid requests by
  tests/schemathesis_hooks.py; mutually exclusive parameters are one exploded object parameter;
- missing_required_header, ignored_auth: no key, no answer;
- use_after_free, ensure_resource_availability: along the links, a revoked key stays revoked
  and a created one can be used.
- Not unsupported_method or allow_header_conformance: they want 405 with an Allow header for a
  method a path lacks; API Gateway answers MISSING_AUTHENTICATION_TOKEN there (a 404 in
  Tally's shape, docs/access.md), and the local stack answers as API Gateway does.
- Not object_level_authorization: it needs two users' credentials per resource; keys are
  checked by scope and prefix (tests/functional/access/test_access.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from openapi_spec_validator import validate

from tests.e2e.stack import PROJECT, LocalStack, running_stack

pytestmark = pytest.mark.e2e

CONFIG = PROJECT / "tests" / "schemathesis.toml"
EXAMPLES = int(os.environ.get("TALLY_SCHEMATHESIS_EXAMPLES", "10"))
SEED = os.environ.get("TALLY_SCHEMATHESIS_SEED", "1")
TIMEOUT_S = int(os.environ.get("TALLY_SCHEMATHESIS_TIMEOUT", "900"))


@pytest.fixture(scope="module")
def fuzzed_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """A stack of its own: the run fills it with generated data no other test should see."""
    with running_stack(tmp_path_factory.mktemp("openapi-stack")) as stack:
        yield stack


def test_given_no_key_when_openapi_json_fetched_over_http_then_a_valid_document(fuzzed_stack: LocalStack) -> None:
    response = fuzzed_stack.get("/openapi.json", key=None)

    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    validate(response.json())


@pytest.mark.parametrize("method", ["TRACE", "PUT", "PATCH", "CONNECT", "BREW"])
def test_given_a_method_a_path_lacks_when_sent_over_http_then_404_in_chalices_shape(
    fuzzed_stack: LocalStack, method: str
) -> None:
    response = fuzzed_stack.request(method, "/counters", key=None)

    assert response.status_code == 404
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == {"Code": "NotFoundError", "Message": "no such route"}


def test_given_a_url_past_what_the_server_reads_then_414_in_chalices_shape(fuzzed_stack: LocalStack) -> None:
    response = fuzzed_stack.get("/counters/c?window=" + "9" * 70_000)

    assert response.status_code == 414
    assert response.headers["Content-Type"] == "application/json"
    assert set(response.json()) == {"Code", "Message"}


def test_given_the_document_when_schemathesis_runs_every_operation_then_no_failure(fuzzed_stack: LocalStack) -> None:
    beacon = fuzzed_stack.post("/keys", json={"scopes": ["ingest"], "note": "schemathesis beacon key"})
    assert beacon.status_code == 201, beacon.text
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(CONFIG),
        "--no-color",
        "run",
        f"{fuzzed_stack.url}/openapi.json",
        # The API's base: the stage's path (the document lists paths below it and names no server).
        "--url",
        fuzzed_stack.url,
        "--max-examples",
        str(EXAMPLES),
        "--seed",
        SEED,
        # One worker: the machine is small, and concurrent workers trip a CPython 3.11 race in
        # ast.parse (hypothesis describing lambdas) that Schemathesis reports as an error.
        "--workers",
        "1",
        "--request-timeout",
        "30",
    ]
    env = {
        **os.environ,
        "TALLY_ADMIN_KEY": fuzzed_stack.admin_key,
        "TALLY_BEACON_KEY": beacon.json()["key"],
    }
    started = time.monotonic()
    done = subprocess.run(
        command,
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    took = time.monotonic() - started
    output = done.stdout + done.stderr
    summary = output[output.rfind("SUMMARY") :] if "SUMMARY" in output else output[-3000:]
    print(f"schemathesis: {EXAMPLES} examples per operation, {took:.0f} s\n{summary}")
    assert done.returncode == 0, output[-20_000:]
    # The run's own admin key still works: nothing revoked it half-way.
    assert fuzzed_stack.get("/keys").status_code == 200
    assert fuzzed_stack.process.poll() is None, fuzzed_stack.log()[-5000:]
