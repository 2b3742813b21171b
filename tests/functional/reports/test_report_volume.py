"""Report runs bounded by volume on moto: an hour larger than one run reads is reported over
several runs, every event once, also when runs die at any step and are run again."""

from __future__ import annotations

import dataclasses
import random
from decimal import Context, Decimal, localcontext
from typing import Any

import pytest

from chalicelib.core import times
from chalicelib.core.settings import Settings
from chalicelib.reports import ranges as report_ranges
from chalicelib.reports import runs as reports_runs
from tests.functional.helpers import (
    REPORT_SETTLE,
    all_reports,
    assert_each_event_once,
    invoke,
    post_events,
    run_now,
)

SETTINGS = Settings()
MINUTE = 60_000
PACK = 3  # events per POST: one pack item each


def post_an_hour(client: Any, clock: Any, posts: int, seed: int = 5) -> dict[str, int]:
    """`posts` POSTs of PACK events over about an hour, each event its own counter and amount;
    some POSTs 1 ms apart, so packs in different shards share or neighbour a cut."""
    rng = random.Random(seed)
    expected: dict[str, int] = {}
    step = 3_600_000 // posts
    for _ in range(posts):
        batch = []
        for _ in range(PACK):
            n = len(expected)
            expected[f"e{n}"] = n
            batch.append({"counter": f"e{n}", "attributes": {"amount": n}})
        post_events(client, batch)
        clock.advance(rng.choice([1, 1, rng.randrange(1, 2 * step)]))
    return expected


def settled_start(client: Any, clock: Any) -> None:
    """A first run sets the checkpoint; the hour of events comes after it."""
    clock.advance(REPORT_SETTLE)
    run_now(client)


def test_given_an_hour_larger_than_a_run_reads_when_runs_follow_then_reported_over_several_runs_each_event_once(
    client: Any, aws: Any, clock: Any
) -> None:
    settled_start(client, clock)
    expected = post_an_hour(client, clock, posts=120)
    clock.advance(REPORT_SETTLE)
    limit = 50
    runs, reads = 0, []
    while True:
        budget = reports_runs.Budget(limit)
        answer = reports_runs.run(aws.dynamodb, aws.s3, SETTINGS, clock.now, budget)
        runs += 1
        reads.append(budget.events_read)
        # Fewer than the budget plus one item per shard, plus the shards read on past the start.
        assert budget.events_read < limit + 2 * SETTINGS.event_write_shards * PACK
        assert answer.superseded is False
        if not answer.more:
            break
        assert runs < 100
    found = all_reports(aws)[1:]
    assert runs >= len(expected) // limit > 5
    assert_each_event_once(found, expected)
    # Cut where the budget ran out, inside quarter hours: ends that are not quarter hours.
    ends = [report_ranges.parse_report_id(r["id"])[1] for r in found]
    assert sum(end % times.QUARTER_HOUR_MS != 0 for end in ends) >= 5
    assert all(r["events"] <= max(reads) for r in found)
    # What a run read at or after its cut is read again by the next run. With a handful of items
    # per shard that is about half of a run (bench.reports measures it at real budgets).
    assert all(r["events"] > 0 for r in found)
    assert sum(reads) < 3 * len(expected)
    # The listing answers the same reports, newest first, tiling the hour.
    listed = client.http.get("/reports?limit=1000").json_body["reports"]
    assert [r["id"] for r in reversed(listed[: len(found)])] == [r["id"] for r in found]


def test_given_a_small_run_budget_setting_when_scheduled_and_posted_runs_alternate_then_each_event_once(
    client: Any, aws: Any, clock: Any, app_module: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app_module, "settings", dataclasses.replace(app_module.settings, report_run_events=60))
    settled_start(client, clock)
    expected = post_an_hour(client, clock, posts=50, seed=9)
    clock.advance(REPORT_SETTLE)
    event = client.events.generate_cw_event("aws.events", "Scheduled Event", {}, [])
    answers = []
    for turn in range(60):
        # POST /reports reads a tenth of a scheduled run's budget: 6 events here.
        answer = invoke(client, "run_scheduled_report", event) if turn % 2 else run_now(client).json_body
        answers.append(answer)
        if not answer["more"]:
            break
    assert answers[-1]["more"] is False
    assert len(answers) > 3
    posted = [a for a in answers[0::2] if a["reports"]]
    assert posted and all(
        r["events"] <= 6 + 2 * SETTINGS.event_write_shards * PACK for a in posted for r in a["reports"]
    )
    assert_each_event_once(all_reports(aws)[1:], expected)


class Died(Exception):
    """The function stopped here (timeout, crash): nothing after this step happened."""


class Dying:
    """An AWS client whose `at`-th call (counted over every client sharing `calls`) dies, before
    or after AWS carried it out."""

    def __init__(self, real: Any, calls: list[int], at: int, when: str, died: list[str]) -> None:
        self._real, self._calls, self._at, self._when, self._died = real, calls, at, when, died

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._real, name)

        def call(**kwargs: Any) -> Any:
            self._calls[0] += 1
            dies = self._calls[0] == self._at
            if dies and self._when == "before":
                self._died.append(name)
                raise Died(name)
            answer = method(**kwargs)
            if dies:
                self._died.append(name)
                raise Died(name)
            return answer

        return call


@pytest.mark.parametrize("when", ["before", "after"])
def test_given_runs_that_die_at_every_step_when_run_again_then_every_event_in_exactly_one_report(
    client: Any, aws: Any, clock: Any, when: str
) -> None:
    settled_start(client, clock)
    expected = post_an_hour(client, clock, posts=30, seed=11)
    clock.advance(REPORT_SETTLE)
    died: list[str] = []
    at = 1
    for _ in range(1000):
        calls = [0]
        dynamodb = Dying(aws.dynamodb, calls, at, when, died)
        s3 = Dying(aws.s3, calls, at, when, died)
        try:
            answer = reports_runs.run(dynamodb, s3, SETTINGS, clock.now, reports_runs.Budget(25))
        except Died:
            at += 1  # the same run again, dying one step later
            continue
        if not answer.more:
            break
        at = 1  # the next run dies at each of its steps in turn
    else:
        pytest.fail("the runs never caught up")
    # Each step of a run died: the checkpoint read, the Queries, both objects, the commit.
    assert {"get_item", "query", "put_object", "transact_write_items"} <= set(died)
    found = all_reports(aws)[1:]
    assert len(found) > 3  # the hour took several runs, dead ones among them
    assert_each_event_once(found, expected)


def test_given_amounts_of_many_digits_when_reported_then_sums_are_the_exact_decimal_sums(
    client: Any, aws: Any, clock: Any
) -> None:
    amounts = [
        Decimal("12345678901234567890.123456789"),
        Decimal("98765432109876543210.987654321"),
        Decimal("0.000000001"),
        Decimal("-11111111111111111111.111111111"),
    ]
    for amount in amounts:
        body = '{"counter": "billing", "attributes": {"amount": %s}}' % amount
        response = client.http.post("/events", headers={"Content-Type": "application/json"}, body=body)
        assert response.status_code == 201, response.body
    clock.advance(REPORT_SETTLE)
    run_now(client)
    (report,) = all_reports(aws)
    with localcontext(Context(prec=100)):
        exact = sum(amounts, Decimal(0))  # 30 digits: the default context (28) would round it
    assert len(exact.as_tuple().digits) > 28
    assert report["counters"]["billing"]["sums_exact"]["amount"] == format(exact, "f")
    csv = client.http.get(f"/reports/{report['id']}.csv").body.decode()
    assert csv.splitlines()[1] == f"billing,4,{format(exact, 'f')}"
