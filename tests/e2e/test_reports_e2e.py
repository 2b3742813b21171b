"""Reports end to end: the local stack as a subprocess, events in and reports out over HTTP."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.e2e.stack import LocalStack, running_stack, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    # Its own stack: the first report must hold only this test's events. Settle 0: events
    # ingested a moment ago are reportable at once.
    with running_stack(tmp_path_factory.mktemp("reports-stack"), REPORT_SETTLE_SECONDS="0") as running:
        yield running


def test_given_events_posted_when_schedule_triggered_and_run_requested_then_reports_served_over_http(
    stack: LocalStack,
) -> None:
    api = stack
    first = [
        {"counter": "sales", "attributes": {"amount": 2.5}},
        {"counter": "sales", "attributes": {"amount": 4}},
        {"counter": "signups"},
    ]
    assert api.post("/events", json={"events": first}, timeout=10).status_code == 201
    time.sleep(0.05)

    # The scheduled handler, run by the stack on demand (what `make trigger` does).
    stack.trigger_schedules()
    listed = wait_for(lambda: api.get("/reports", timeout=5).json()["reports"], 30, "the scheduled report")
    assert [r["events"] for r in listed] == [3]
    report = api.get(f"/reports/{listed[0]['id']}", timeout=5).json()
    assert report["counters"] == {
        "sales": {"events": 2, "sums": {"amount": 6.5}, "sums_exact": {"amount": "6.5"}},
        "signups": {"events": 1, "sums": {}, "sums_exact": {}},
    }

    assert api.post("/events", json={"counter": "sales", "attributes": {"amount": 1}}, timeout=10).status_code == 201
    time.sleep(0.05)
    ran = api.post("/reports", timeout=30)
    assert ran.status_code == 201
    (second,) = ran.json()["reports"]
    listed = api.get("/reports", timeout=5).json()["reports"]
    assert [r["id"] for r in listed] == [second["id"], report["id"]]
    assert listed[0]["start"] == report["end"]
    fetched = api.get(f"/reports/{second['id']}", timeout=5)
    assert fetched.status_code == 200
    assert fetched.json()["counters"] == {"sales": {"events": 1, "sums": {"amount": 1}, "sums_exact": {"amount": "1"}}}
    assert api.get("/reports/20201121T230000000Z-20201122T000000000Z", timeout=5).status_code == 404
