"""The one transaction helper: what it makes of each answer DynamoDB or the SDK can give. No I/O."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ParamValidationError

from chalicelib.core import transactions
from chalicelib.core.errors import RejectedError, StorageError
from chalicelib.core.storage_errors import ConditionFailed


class Scripted:
    """A client answering each TransactWriteItems with the next scripted outcome."""

    def __init__(self, *outcomes: BaseException | None) -> None:
        self.outcomes = list(outcomes)
        self.sent: list[list[dict[str, Any]]] = []

    def transact_write_items(self, TransactItems: list[dict[str, Any]]) -> dict[str, Any]:
        self.sent.append(TransactItems)
        outcome = self.outcomes.pop(0)
        if outcome is not None:
            raise outcome
        return {}


def cancelled(*codes: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": "TransactionCanceledException"}, "CancellationReasons": [{"Code": c} for c in codes]},
        "TransactWriteItems",
    )


def test_given_condition_not_the_applied_one_when_adapt_changes_plan_then_retried_with_new_items() -> None:
    switched: set[str] = set()

    def plan() -> transactions.Plan:
        items = [{"Update": {"Key": m, "Form": "add only" if m in switched else "guarded"}} for m in ("a", "b")]
        return transactions.Plan(items, applied_if=0)

    def adapt(failed: list[dict[str, Any]]) -> bool:
        new = {item["Update"]["Key"] for item in failed} - switched
        switched.update(new)
        return bool(new)

    client = Scripted(cancelled("None", "ConditionalCheckFailed"), None)
    assert transactions.write(client, plan, what="t", adapt=adapt, sleep=lambda s: None) is True
    assert [i["Update"]["Form"] for i in client.sent[1]] == ["guarded", "add only"]


def test_given_the_applied_if_item_fails_when_writing_then_false_without_adapting_or_retrying() -> None:
    adapted: list[list[dict[str, Any]]] = []
    client = Scripted(cancelled("ConditionalCheckFailed", "ConditionalCheckFailed"))
    written = transactions.write(
        client,
        lambda: transactions.Plan([{"Delete": {}}, {"Update": {}}], applied_if=0),
        what="t",
        adapt=lambda failed: adapted.append(failed) is None,
        sleep=lambda s: None,
    )
    assert written is False and adapted == [] and len(client.sent) == 1


def test_given_adapt_makes_no_change_when_condition_fails_again_then_condition_failed_error() -> None:
    client = Scripted(cancelled("ConditionalCheckFailed"))
    with pytest.raises(ConditionFailed):
        transactions.write(
            client,
            lambda: transactions.Plan([{"Put": {}}]),
            what="t",
            adapt=lambda failed: False,
            sleep=lambda s: None,
        )


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ParamValidationError(report="bad value"), RejectedError),
        (EndpointConnectionError(endpoint_url="http://x"), StorageError),
        (ClientError({"Error": {"Code": "ValidationException"}}, "TransactWriteItems"), RejectedError),
    ],
)
def test_given_sdk_or_service_error_when_writing_then_rejected_only_if_about_the_data(
    error: BaseException, expected: type[Exception]
) -> None:
    with pytest.raises(expected) as raised:
        transactions.write(Scripted(error), lambda: transactions.Plan([{"Put": {}}]), what="t", sleep=lambda s: None)
    assert isinstance(raised.value, RejectedError) == (expected is RejectedError)


def test_given_fixed_items_when_a_conflict_then_success_then_written_once_retried() -> None:
    items = [{"Put": {"Item": "x"}}, {"ConditionCheck": {"Key": "y"}}]
    client = Scripted(cancelled("TransactionConflict", "None"), None)
    assert transactions.write_items(client, items, what="t") is True
    assert client.sent == [items, items]


def test_given_fixed_items_when_a_condition_fails_then_false_and_not_retried() -> None:
    client = Scripted(cancelled("None", "ConditionalCheckFailed"))
    assert transactions.write_items(client, [{"Put": {}}, {"ConditionCheck": {}}], what="t") is False
    assert len(client.sent) == 1


def test_given_fixed_items_when_refused_then_rejected_not_false() -> None:
    client = Scripted(cancelled("ValidationError"))
    with pytest.raises(RejectedError):
        transactions.write_items(client, [{"Put": {}}], what="t")
