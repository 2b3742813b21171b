"""The audit's arithmetic (counters/audit.py): which quarter hours a run compares, and whether a
partition adds up, against brute force."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core import telemetry
from chalicelib.counters import audit, audit_items
from chalicelib.events import ingest

Q = audit.QUARTER_MS
T0 = 1_795_000_000_000 - 1_795_000_000_000 % Q

numbers = st.integers(0, 10_000)


@given(stored=numbers, applied=numbers, set_aside=numbers, expired=numbers, repaired=st.integers(-50, 50))
def test_given_any_numbers_when_compared_then_short_by_exactly_what_is_unaccounted(
    stored: int, applied: int, set_aside: int, expired: int, repaired: int
) -> None:
    numbers = {"applied": applied, "set_aside": set_aside, "expired": expired, "repaired": repaired}
    finding = audit.finding("202611181415#0", stored, numbers)
    missing = stored - applied - set_aside - expired - repaired
    assert finding.shortfall == missing
    assert finding.adds_up == (missing == 0)
    assert finding.as_dict()["shortfall"] == missing


def test_given_no_audit_item_when_compared_then_every_stored_event_is_missing() -> None:
    assert audit.finding("202611181415#0", 7, {}).shortfall == 7
    assert audit.finding("202611181415#0", 0, {}).adds_up


@given(st.lists(st.tuples(numbers, numbers), max_size=20))
def test_given_findings_when_summed_then_excesses_do_not_hide_shortfalls(pairs: list[tuple[int, int]]) -> None:
    findings = [audit.finding(f"x#{i}", s, {"applied": a}) for i, (s, a) in enumerate(pairs)]
    assert audit.total_shortfall(findings) == sum(s - a for s, a in pairs if s > a)


@given(
    start=st.integers(0, 200),
    settle=st.integers(1, 120),
    steps=st.lists(st.integers(0, 400 * 60_000), min_size=1, max_size=12),
    most=st.integers(1, 20),
)
def test_given_runs_at_any_times_when_each_moves_the_checkpoint_then_every_settled_quarter_is_compared_once(
    start: int, settle: int, steps: list[int], most: int
) -> None:
    now = T0 + start * 60_000
    checkpoint = audit.settled_before(now, settle)  # where the first run puts it
    compared: list[int] = []
    for step in steps:
        now += step
        quarters = audit.quarters_to_audit(checkpoint, now, settle, most)
        assert len(quarters) <= most
        for q in quarters:
            assert q % Q == 0 and q + Q + settle * 60_000 <= now, "compared before it closed and settled"
        if quarters:
            assert quarters[0] == checkpoint
            checkpoint = quarters[-1] + Q
        compared += quarters
    assert compared == sorted(set(compared)), "a quarter hour compared twice"
    if compared:
        assert compared == list(range(compared[0], compared[-1] + Q, Q)), "a quarter hour skipped"


def test_given_a_checkpoint_when_planned_then_the_quarters_up_to_the_last_settled_one() -> None:
    now = T0 + 45 * 60_000 + 1
    assert audit.quarters_to_audit(T0 - 2 * Q, now, 30, 100) == [T0 - 2 * Q, T0 - Q, T0]
    assert audit.quarters_to_audit(T0 + Q, now, 30, 100) == []  # not settled yet
    assert audit.quarters_to_audit(T0 - 2 * Q, now, 30, 2) == [T0 - 2 * Q, T0 - Q]


@given(st.integers(0, 10**7), st.integers(0, 99))
def test_given_a_partition_key_when_read_back_then_its_quarter_hour(quarter: int, shard: int) -> None:
    start = T0 + quarter * Q
    pk = ingest.partition_key(start + 7 * 60_000, shard)
    assert audit.quarter_of(pk) == start
    assert pk in audit.partitions(start, shard + 1)


@pytest.mark.parametrize("text", ["", "202611181410#0", "2026111814#0", "202611181415", "202611181415#x", "AUD#1"])
def test_given_not_a_partition_key_when_read_then_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        audit.quarter_of(text)


def test_given_an_audit_run_result_when_turned_into_metrics_then_shortfall_is_a_metric() -> None:
    result = {"audited": 8, "shortfall": 3, "short": [{}, {}], "open": 2, "superseded": False}
    values = telemetry.metric_values(result, {}, 0)
    assert values["Shortfall"] == 3 and values["PartitionsAudited"] == 8 and values["ShortPartitions"] == 2
    assert values["OpenFindings"] == 2 and values["AuditRuns"] == 1 and values["AuditRunsSuperseded"] == 0


@given(
    shares=st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from(audit_items.ACCOUNTS), st.integers(0, 100)), max_size=40
    ),
    items=st.integers(1, 3),
)
def test_given_numbers_spread_over_a_quarter_hours_items_when_read_then_each_partition_gets_exactly_its_own(
    shares: list[tuple[int, str, int]], items: int
) -> None:
    """Numbers of a quarter hour's partitions (write shards 0-3) ADDed on its items (one per stream
    shard): a partition's numbers are the sum of its own attributes, whatever else the items hold."""
    quarter = ingest.partition_key(T0, 0).split("#")[0]
    stored: list[dict[str, dict[str, str]]] = [{} for _ in range(items)]
    truth: dict[str, dict[str, int]] = {}
    for n, (shard, account, k) in enumerate(shares):
        pk = ingest.partition_key(T0, shard)
        name = audit_items.attribute(account, pk)
        item = stored[n % items]
        item[name] = {"N": str(int(item.get(name, {"N": "0"})["N"]) + k)}
        truth.setdefault(pk, dict.fromkeys(audit_items.ACCOUNTS, 0))[account] += k
    for shard in range(4):
        pk = ingest.partition_key(T0, shard)
        assert audit_items.split(pk) == (quarter, str(shard))
        expected = truth.get(pk, dict.fromkeys(audit_items.ACCOUNTS, 0))
        assert audit_items.group_accounts(stored, pk) == expected
        assert audit_items.accounted(audit_items.group_accounts(stored, pk)) == sum(expected.values())
    assert len({audit_items.group_pk(ingest.partition_key(T0, s)) for s in range(4)}) == 1
    assert audit_items.group_pk(ingest.partition_key(T0 + Q, 0)) != audit_items.group_pk(ingest.partition_key(T0, 0))
