"""The one way Tally runs a TransactWriteItems: `write_items` for a fixed list of items, `write`
for the one caller whose members an earlier delivery may have applied (counters' replay). How a
cancellation is read and retried: docs/design.md, "Transactions"; what a transaction
guarantees: docs/guarantees.md, "A transaction applies all of its writes or none".
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

from chalicelib.core import dynamo_limits, retry
from chalicelib.core.aws import DynamoDB
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import REJECTED_ERROR_CODES, RejectedError, StorageError
from chalicelib.core.storage_errors import ConditionFailed, error_code

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

T = TypeVar("T")

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
class Plan(Generic[T]):
    """A transaction's items and, for each item, the member it belongs to (None: shared)."""

    items: list[dict[str, Any]]
    owners: list[T | None]


@dataclass
class Outcome(Generic[T]):
    applied: list[T] = field(default_factory=list)
    duplicates: list[T] = field(default_factory=list)
    attempts: int = 0
    retries: int = 0  # attempts that waited for a transient failure


def _cancellation_reasons(exc: ClientError) -> list[str] | None:
    """Per-item codes of a cancelled transaction, in item order ("None" for an item that was
    fine), or None when the error is not a cancellation."""
    if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
        return None
    return [r.get("Code") or "None" for r in exc.response.get("CancellationReasons", [])]


def write(
    dynamodb: DynamoDB,
    members: Sequence[T],
    plan: Callable[[list[T]], Plan[T]],
    *,
    what: str,
    duplicates: Callable[[list[T | None], list[T]], Collection[T]] | None = None,
    adapt: Callable[[list[dict[str, Any]]], bool] | None = None,
    attempts: int = 7,
    cap: float = 2.0,
    sleep: Sleep | None = None,
) -> Outcome[T]:
    """Apply `members` in one transaction (or learn that some already were);
    ConditionFailed when a condition failed that names no duplicate and `adapt` did not
    change the plan. `duplicates(failed owners, pending)` returns the members an earlier
    delivery applied; `adapt(failed items)` returns True if it changed the plan so that
    retrying at once can succeed (never twice for one change)."""
    outcome: Outcome[T] = Outcome()
    pending = list(members)
    while pending:
        transaction = plan(pending)
        if not transaction.items:
            break
        outcome.attempts += 1
        try:
            # Items are built as plain dicts by each capability's planner; the SDK checks their shape.
            dynamodb.transact_write_items(TransactItems=cast("list[TransactWriteItemTypeDef]", transaction.items))
            outcome.applied += pending
            return outcome
        except ParamValidationError as exc:  # the SDK refused the data before sending it
            raise RejectedError(f"{what} rejected: {exc}") from exc
        except BotoCoreError as exc:  # no answer (connection, timeout) after the SDK's own retries
            raise StorageError(f"{what} failed: {type(exc).__name__}") from exc
        except ClientError as exc:
            code, reasons = error_code(exc), _cancellation_reasons(exc)
            cause: ClientError = exc
        if reasons is None:
            if code in REJECTED_ERROR_CODES:
                raise RejectedError(f"{what} rejected: {code}") from cause
            if code not in RETRYABLE_ERRORS:
                raise StorageError(f"{what} failed: {code}") from cause
        else:
            if any(r in REJECTED_CANCELLATIONS for r in reasons):
                raise RejectedError(f"{what} rejected: {reasons}") from cause
            failed = [i for i, r in enumerate(reasons) if r == "ConditionalCheckFailed"]
            if failed:
                owners = [transaction.owners[i] if i < len(transaction.owners) else None for i in failed]
                seen = duplicates(owners, pending) if duplicates is not None else ()
                if seen:
                    ids = {id(m) for m in seen}
                    outcome.duplicates += [m for m in pending if id(m) in ids]
                    pending = [m for m in pending if id(m) not in ids]
                    continue
                if adapt is not None and adapt([transaction.items[i] for i in failed if i < len(transaction.items)]):
                    continue
                raise ConditionFailed(f"{what}: a condition failed", None)
            unknown = [r for r in reasons if r not in RETRYABLE_CANCELLATIONS | {"None"}]
            if unknown or not reasons:
                raise StorageError(f"{what} cancelled: {reasons}") from cause
        if outcome.retries >= attempts:
            raise StorageError(f"{what} kept failing: {code} {reasons or ''}".strip()) from cause
        retry.pause(outcome.retries, sleep, cap)
        outcome.retries += 1
    return outcome


def write_items(
    dynamodb: DynamoDB, items: list[dict[str, Any]], *, what: str, attempts: int = 7, sleep: Sleep | None = None
) -> bool:
    """Write a fixed list of transaction items, retrying transient failures as `write` does:
    True once written, False when one of their conditions failed (nothing was written)."""
    try:
        write(dynamodb, [what], lambda _: Plan(items, [None] * len(items)), what=what, attempts=attempts, sleep=sleep)
    except ConditionFailed:
        return False
    return True
