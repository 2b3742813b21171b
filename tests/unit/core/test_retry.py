"""The one retry loop: a pause before every retry, none before the first attempt or after the last."""

from __future__ import annotations

from chalicelib.core import retry


def test_given_every_attempt_fails_then_the_budget_is_spent_with_a_pause_between_each_and_none_after() -> None:
    pauses: list[float] = []
    tried = list(retry.attempts(4, pauses.append, cap=1.0))
    assert tried == [0, 1, 2, 3]
    assert len(pauses) == 3  # between attempts only
    assert all(0.025 * 2**n <= p <= 0.05 * 2**n for n, p in enumerate(pauses))


def test_given_the_second_attempt_succeeds_then_one_pause_and_no_more_attempts() -> None:
    pauses: list[float] = []
    for attempt in retry.attempts(5, pauses.append):
        if attempt == 1:
            break
    else:
        raise AssertionError("the loop ran out")
    assert len(pauses) == 1


def test_given_a_cap_then_no_pause_exceeds_it() -> None:
    pauses: list[float] = []
    list(retry.attempts(12, pauses.append, cap=0.4))
    assert max(pauses) <= 0.4 and len(pauses) == 11
