"""core.storage_errors: a ClientError becomes Tally's exception by its code, never its message;
the item a failed condition found is read one way."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from chalicelib.core import storage_errors
from chalicelib.core.errors import REJECTED_ERROR_CODES, RejectedError, StorageError
from chalicelib.core.storage_errors import ConditionFailed, condition_item, translated

ITEM = {"pk": {"S": "CTR#a"}, "sk": {"S": "h#1"}, "n": {"N": "3"}}
KEY = {"pk": {"S": "CTR#a"}, "sk": {"S": "h#1"}}


def client_error(code: str, message: str = "", item: dict[str, Any] | None = None) -> ClientError:
    response: dict[str, Any] = {"Error": {"Code": code, "Message": message}}
    if item is not None:
        response["Item"] = item
    return ClientError(response, "UpdateItem")  # type: ignore[arg-type]


def raised(exc: BaseException) -> BaseException:
    with pytest.raises(StorageError) as caught, translated("could not write a bucket"):
        raise exc
    return caught.value


def test_given_a_failed_condition_with_the_item_returned_then_condition_failed_carrying_it() -> None:
    cause = client_error("ConditionalCheckFailedException", "The conditional request failed", ITEM)
    exc = raised(cause)
    assert type(exc) is ConditionFailed
    assert exc.item == ITEM  # type: ignore[attr-defined]
    assert exc.__cause__ is cause
    assert str(exc).startswith("could not write a bucket")


def test_given_a_failed_condition_without_the_item_then_condition_failed_with_none() -> None:
    exc = raised(client_error("ConditionalCheckFailedException"))
    assert isinstance(exc, ConditionFailed) and exc.item is None


@pytest.mark.parametrize("code", sorted(REJECTED_ERROR_CODES))
def test_given_a_refusal_of_the_data_then_rejected_naming_the_code(code: str) -> None:
    exc = raised(client_error(code, "One or more parameter values were invalid"))
    assert type(exc) is RejectedError
    assert code in str(exc) and str(exc).startswith("could not write a bucket")


@pytest.mark.parametrize(
    "code", ["ProvisionedThroughputExceededException", "InternalServerError", "ResourceNotFoundException", ""]
)
def test_given_any_other_code_then_storage_error_with_the_callers_words(code: str) -> None:
    exc = raised(client_error(code))
    assert type(exc) is StorageError
    assert str(exc) == "could not write a bucket"


def test_given_a_message_that_names_another_error_then_only_the_code_decides() -> None:
    exc = raised(client_error("ThrottlingException", "ConditionalCheckFailedException ValidationException"))
    assert type(exc) is StorageError


def test_given_no_client_error_then_it_passes_through_untouched() -> None:
    with pytest.raises(KeyError), translated("could not read"):
        raise KeyError("n")


class Reads:
    """A DynamoDB client that answers GetItem with `found` and records each call."""

    def __init__(self, found: dict[str, Any] | None = None, error: str | None = None) -> None:
        self.found, self.error = found, error
        self.calls: list[dict[str, Any]] = []

    def get_item(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        if self.error:
            raise client_error(self.error)
        return {} if self.found is None else {"Item": self.found}


def test_given_the_item_came_with_the_failure_then_it_is_read_from_there_without_a_call() -> None:
    reads = Reads()
    failed = ConditionFailed("x", ITEM)
    assert condition_item(reads, "counts", KEY, failed) == ITEM  # type: ignore[arg-type]
    assert condition_item(reads, "counts", KEY, client_error("ConditionalCheckFailedException", item=ITEM)) == ITEM  # type: ignore[arg-type]
    assert reads.calls == []


def test_given_the_failure_lacks_the_item_then_one_consistent_read_of_its_key() -> None:
    reads = Reads(found=ITEM)
    assert condition_item(reads, "counts", KEY, ConditionFailed("x", None)) == ITEM  # type: ignore[arg-type]
    assert reads.calls == [{"TableName": "counts", "Key": KEY, "ConsistentRead": True}]
    assert condition_item(Reads(), "counts", KEY, client_error("ConditionalCheckFailedException")) is None  # type: ignore[arg-type]


def test_given_the_read_back_fails_then_storage_error() -> None:
    with pytest.raises(StorageError, match="could not read the item a condition failed on"):
        condition_item(Reads(error="InternalServerError"), "counts", KEY, ConditionFailed("x", None))  # type: ignore[arg-type]


def test_error_code_reads_the_code_or_nothing() -> None:
    assert storage_errors.error_code(client_error("TransactionCanceledException")) == "TransactionCanceledException"
    assert storage_errors.error_code(ClientError({}, "GetItem")) == ""  # type: ignore[arg-type]
