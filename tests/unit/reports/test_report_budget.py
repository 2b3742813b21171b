"""A report run's budget: how many items each page asks for, and when it is spent."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from chalicelib.events import ingest as events
from chalicelib.reports import runs as reports_runs
from chalicelib.reports.runs import PAGE_ITEMS, Budget


def pack(n: int) -> dict[str, object]:
    return {"kind": "pack", "n": n} if n > 1 else {"kind": "event"}


@given(
    limit=st.integers(1, 300_000),
    read=st.lists(st.integers(1, events.MAX_BATCH), max_size=50),
    readers=st.integers(1, 8),
)
def test_given_items_no_larger_than_those_read_when_a_round_of_pages_is_asked_then_the_events_left_hold_it(
    limit: int, read: list[int], readers: int
) -> None:
    budget = Budget(limit)
    for n in read:
        budget.count(pack(n))
    items = budget.page_items(readers)
    assert 1 <= items <= PAGE_ITEMS
    widest = max(read, default=events.MAX_BATCH)
    left = limit - budget.events_read
    if left >= readers * widest:
        # A full round of pages, every item as large as the largest read: within what is left.
        assert readers * items * widest <= left
    # Otherwise one item per reader: the run passes its budget by less than one item per shard.


def test_given_events_or_queries_used_up_when_asked_then_spent() -> None:
    budget = Budget(10, queries=3)
    assert not budget.spent
    budget.count(pack(10))
    assert budget.spent and budget.widest == 10
    other = Budget(10, queries=3)
    other.queries_made = 3
    assert other.spent


def test_given_settings_when_budgets_made_then_a_request_reads_a_tenth_of_a_scheduled_run() -> None:
    from chalicelib.core.settings import Settings

    settings = Settings()
    scheduled, request = reports_runs.scheduled_budget(settings), reports_runs.request_budget(settings)
    assert scheduled.events == settings.report_run_events
    assert request.events == settings.report_run_events // reports_runs.REQUEST_SHARE
    assert request.queries == reports_runs.MAX_RUN_QUERIES // reports_runs.REQUEST_SHARE
