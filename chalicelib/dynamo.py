"""DynamoDB helpers shared by the storage modules."""

from __future__ import annotations

from typing import Any, Iterator

from botocore.exceptions import ClientError

from chalicelib.errors import StorageError


def query_pages(dynamodb: Any, request: dict[str, Any], failure: str) -> Iterator[dict[str, Any]]:
    """Every page of a Query; a failed call becomes StorageError(failure)."""
    request = dict(request)
    while True:
        try:
            page = dynamodb.query(**request)
        except ClientError as exc:
            raise StorageError(failure) from exc
        yield page
        if "LastEvaluatedKey" not in page:
            return
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
