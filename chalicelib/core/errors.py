"""Tally's own exceptions. app.py maps them to HTTP answers in one place."""

from __future__ import annotations

# DynamoDB's answers about the request's data: the same request can never succeed.
REJECTED_ERROR_CODES = frozenset({"ValidationException", "ItemCollectionSizeLimitExceededException"})


class TallyError(Exception):
    """Base of every error Tally raises on purpose."""


class ValidationError(TallyError):
    """The client sent something Tally will not accept (HTTP 400)."""


class NotFoundError(TallyError):
    """The thing asked for does not exist (HTTP 404)."""


class StorageError(TallyError):
    """A storage call failed after retries (HTTP 503)."""


class RejectedError(StorageError):
    """Storage refused the data itself (DynamoDB's ValidationException): no retry can change
    the answer, so a route answers 400 and a background handler sets the record aside."""


class PartialWriteError(StorageError):
    """Some items of a batch were stored and some were not."""

    def __init__(self, message: str, stored: list[str], failed: list[str]) -> None:
        super().__init__(message)
        self.details = {"stored": stored, "failed": failed}


def reason(exc: BaseException) -> str:
    """Why a record was set aside, as stored beside it: our own messages as they are, anything
    else with its type. Lone surrogates are escaped, so storing the reason cannot fail too."""
    return storable(str(exc) if isinstance(exc, ValidationError | RejectedError) else f"{type(exc).__name__}: {exc}")


def storable(text: str) -> str:
    """`text` with any lone surrogate escaped, so that DynamoDB can store it."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
