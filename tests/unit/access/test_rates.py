"""A process's allowance per key and second (access/rates.py): pure, checked without I/O."""

from __future__ import annotations

from typing import Any, cast

from chalicelib.access import rates
from chalicelib.core.aws import DynamoDB

SECOND = 1_795_000_000


class Client:
    """Stands for a process's DynamoDB client: the allowances are kept per client."""


def client() -> DynamoDB:
    return cast(Any, Client())


def takes(allowances: rates.Allowances, dynamodb: DynamoDB, key_id: str, second: int, times: int) -> list[bool]:
    return [allowances.take(dynamodb, key_id, second) for _ in range(times)]


def test_given_one_second_when_a_key_asks_again_and_again_then_only_its_allowance_is_free() -> None:
    allowances, dynamodb = rates.Allowances(), client()

    assert takes(allowances, dynamodb, "a", SECOND, 3) == [True] * rates.ALLOWANCE + [False] * (3 - rates.ALLOWANCE)
    assert takes(allowances, dynamodb, "b", SECOND, 1) == [True]  # another key has its own


def test_given_the_second_turns_when_the_key_asks_then_its_allowance_is_back_and_the_old_second_forgotten() -> None:
    allowances, dynamodb = rates.Allowances(), client()
    takes(allowances, dynamodb, "a", SECOND, 2)
    takes(allowances, dynamodb, "b", SECOND, 1)

    assert takes(allowances, dynamodb, "a", SECOND + 1, 1) == [True]
    assert allowances._taken[dynamodb] == (SECOND + 1, {"a": 1})  # bounded: one second's keys


def test_given_the_clock_stepped_back_when_a_key_asks_for_an_earlier_second_then_nothing_is_free() -> None:
    allowances, dynamodb = rates.Allowances(), client()
    takes(allowances, dynamodb, "a", SECOND + 1, 1)

    assert takes(allowances, dynamodb, "b", SECOND, 1) == [False]


def test_given_two_clients_or_a_cleared_process_when_a_key_asks_then_each_has_its_own_allowance() -> None:
    allowances, one, other = rates.Allowances(), client(), client()
    takes(allowances, one, "a", SECOND, 1)

    assert takes(allowances, other, "a", SECOND, 1) == [True]
    allowances.clear()
    assert takes(allowances, one, "a", SECOND, 1) == [True]
