"""The one way Tally runs a TransactWriteItems (`write_items`, `write`): docs/design.md, "Transactions"; what a
transaction guarantees: docs/guarantees.md, "A transaction applies all of its writes or none"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

from chalicelib.core import dynamo_limits, retry
from chalicelib.core.aws import DynamoDB
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import REJECTED_ERROR_CODES, RejectedError, StorageError
from chalicelib.core.storage_errors import ConditionFailed, error_code

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

MAX_ITEMS = dynamo_limits.TRANSACTION_ITEMS
# Cancellation reasons that say "try again", not "this item is wrong".
RETRYABLE_CANCELLATIONS = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"}
)
# Error codes of the call itself that say the same.
RETRYABLE_ERRORS = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TransactionInProgressException",
        "TransactionConflictException",
        "InternalServerError",
        "ServiceUnavailable",
    }
)
REJECTED_CANCELLATIONS = frozenset({"ValidationError", "ItemCollectionSizeLimitExceeded"})


@dataclass(frozen=True)
class Plan:
    """A transaction's items; `applied_if` is the index of the item whose failed condition means an
    earlier delivery applied the whole transaction (None: no such item)."""

    items: list[dict[str, Any]]
    applied_if: int | None = None


def write(
    dynamodb: DynamoDB,
    plan: Callable[[], Plan],
    *,
    what: str,
    adapt: Callable[[list[dict[str, Any]]], bool] | None = None,
    attempts: int = 7,
    sleep: Sleep | None = None,
) -> bool:
    """Apply `plan()`'s items in one transaction: True once written, False when its `applied_if`
    item's condition failed; `adapt(failed items)` as docs/design.md, "Transactions" says."""
    retries = 0
    while True:
        transaction = plan()
        if not transaction.items:
            return True
        try:
            # Items are built as plain dicts by each capability's planner; the SDK checks their shape.
            dynamodb.transact_write_items(TransactItems=cast("list[TransactWriteItemTypeDef]", transaction.items))
            return True
        except ParamValidationError as exc:  # the SDK refused the data before sending it
            raise RejectedError(f"{what} rejected: {exc}") from exc
        except BotoCoreError as exc:  # no answer (connection, timeout) after the SDK's own retries
            raise StorageError(f"{what} failed: {type(exc).__name__}") from exc
        except ClientError as exc:
            code, cause = error_code(exc), exc
        reasons: list[str] = []
        if code != "TransactionCanceledException":
            if code in REJECTED_ERROR_CODES:
                raise RejectedError(f"{what} rejected: {code}") from cause
            if code not in RETRYABLE_ERRORS:
                raise StorageError(f"{what} failed: {code}") from cause
        else:
            # Per-item codes, in item order ("None" for an item that was fine).
            reasons = [r.get("Code") or "None" for r in cause.response.get("CancellationReasons", [])]
            if any(r in REJECTED_CANCELLATIONS for r in reasons):
                raise RejectedError(f"{what} rejected: {reasons}") from cause
            failed = [i for i, r in enumerate(reasons) if r == "ConditionalCheckFailed"]
            if failed:
                if transaction.applied_if in failed:
                    return False
                if adapt is not None and adapt([transaction.items[i] for i in failed if i < len(transaction.items)]):
                    continue
                raise ConditionFailed(f"{what}: a condition failed", None)
            if not reasons or any(r not in RETRYABLE_CANCELLATIONS | {"None"} for r in reasons):
                raise StorageError(f"{what} cancelled: {reasons}") from cause
        if retries >= attempts:
            raise StorageError(f"{what} kept failing: {code} {reasons or ''}".strip()) from cause
        retry.pause(retries, sleep)
        retries += 1


def write_items(
    dynamodb: DynamoDB, items: list[dict[str, Any]], *, what: str, attempts: int = 7, sleep: Sleep | None = None
) -> bool:
    """Write a fixed list of transaction items, retrying transient failures as `write` does:
    True once written, False when one of their conditions failed (nothing was written)."""
    try:
        return write(dynamodb, lambda: Plan(items), what=what, attempts=attempts, sleep=sleep)
    except ConditionFailed:
        return False
