"""Tally's own exceptions. app.py maps them to HTTP answers in one place."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError


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
        self.stored = stored
        self.failed = failed

    def details(self) -> dict[str, Any]:
        return {"stored": self.stored, "failed": self.failed}


def about_storage(exc: BaseException) -> bool:
    """True when a failure says nothing about the records being written: storage unavailable or
    throttled past the retries (StorageError), or not reached at all (the SDK's own errors:
    connection, timeouts, credentials). A background handler leaves such records for
    redelivery; anything else that fails for one record alone, whatever the exception, is that
    record's fault and sets it aside."""
    return isinstance(exc, (StorageError, BotoCoreError)) and not isinstance(exc, RejectedError)


def reason(exc: BaseException) -> str:
    """Why a record was set aside, as stored beside it."""
    return str(exc) if isinstance(exc, ValidationError) else f"{type(exc).__name__}: {exc}"
