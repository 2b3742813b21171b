"""Where a botocore `ClientError` becomes Tally's own exception (`translated`), and the one GetItem
(core.dynamo gives it to the rest): docs/design.md, "Errors" and "Queries"."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import ClientError

from chalicelib.core.aws import DynamoDB
from chalicelib.core.errors import REJECTED_ERROR_CODES, RejectedError, StorageError

CONDITION_FAILED = "ConditionalCheckFailedException"
# A single-item write on an item a transaction holds ("Transaction conflict handling", DynamoDB developer guide).
TRANSACTION_CONFLICT = "TransactionConflictException"


class ConditionFailed(StorageError):
    """A conditional write found the item other than its condition required; `item`, the item
    DynamoDB returned with the failure (None: the call did not ask for it, or there was none)."""

    def __init__(self, message: str, item: dict[str, Any] | None) -> None:
        super().__init__(message)
        self.item = item


class ConflictError(StorageError):
    """A single-item write refused because a transaction was writing the same item: retry it."""


def error_code(exc: ClientError) -> str:
    """The error code AWS answered (`Error.Code`), "" when the response holds none."""
    return str(exc.response.get("Error", {}).get("Code", ""))


def returned_item(exc: ClientError) -> dict[str, Any] | None:
    """The item a failed condition returned with the error (ReturnValuesOnConditionCheckFailure)."""
    item = exc.response.get("Item")
    return dict(item) if isinstance(item, Mapping) else None


@contextmanager
def translated(failure: str) -> Iterator[None]:
    """Run storage calls; a `ClientError` leaves as Tally's exception, chained, `failure` saying what
    could not be done."""
    try:
        yield
    except ClientError as exc:
        code = error_code(exc)
        if code == CONDITION_FAILED:
            raise ConditionFailed(f"{failure}: a condition failed", returned_item(exc)) from exc
        if code == TRANSACTION_CONFLICT:
            raise ConflictError(f"{failure}: a transaction held the item") from exc
        if code in REJECTED_ERROR_CODES:
            raise RejectedError(f"{failure}: DynamoDB refused the data ({code})") from exc
        raise StorageError(failure) from exc


def get_item(
    dynamodb: DynamoDB,
    table: str,
    key: dict[str, Any],
    failure: str,
    *,
    consistent: bool = True,
    names: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """The item at `key` (None when there is none), strongly consistent unless not `consistent`;
    with `names` (placeholder: attribute), only those attributes."""
    request: dict[str, Any] = {"TableName": table, "Key": key, "ConsistentRead": consistent}
    if names:
        request |= {"ProjectionExpression": ", ".join(names), "ExpressionAttributeNames": dict(names)}
    with translated(failure):
        response = dynamodb.get_item(**request)
    return dict(response["Item"]) if "Item" in response else None


def condition_item(
    dynamodb: DynamoDB,
    table: str,
    key: dict[str, Any],
    failed: ConditionFailed | ClientError,
    failure: str = "could not read the item a condition failed on",
) -> dict[str, Any] | None:
    """The item a failed condition found, or None (how it is read: docs/design.md, "Errors")."""
    item = failed.item if isinstance(failed, ConditionFailed) else returned_item(failed)
    return item if item is not None else get_item(dynamodb, table, key, failure)
