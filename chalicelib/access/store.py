"""Access keys in the counts table: create, find, list, revoke by id; the plain key is never stored. docs/access.md,
"Keys" and "Revocation"."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from chalicelib.access import api_keys
from chalicelib.access.policy import KeyRecord, NewKey
from chalicelib.core import attributes, dynamo, keyspace, pager
from chalicelib.core.aws import DynamoDB
from chalicelib.core.client_cache import ClientCache
from chalicelib.core.errors import NotFoundError, ValidationError
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import ConditionFailed, translated


def create(
    dynamodb: DynamoDB, settings: Settings, new: NewKey, now_ms: int, key: str | None = None
) -> tuple[str, KeyRecord]:
    """Store a new key (a fresh one, or `key` when given and not stored yet); the plain key is
    returned to show once. Storing a given key again changes nothing."""
    key = key or api_keys.generate()
    digest = api_keys.digest(key)
    record = KeyRecord(api_keys.key_id(digest), created_ms=now_ms, **vars(new))
    item: dict[str, Any] = {
        "pk": {"S": keyspace.ACCESS_KEY},
        "sk": {"S": digest},
        "id": {"S": record.id},
        "scopes": {"SS": sorted(record.scopes)},
        "note": {"S": record.note},
        "created_ms": {"N": str(now_ms)},
        "rate_per_second": {"N": str(record.rate_per_second)},
    }
    if record.prefix is not None:
        item["prefix"] = {"S": record.prefix}
    lists = {"origins": record.origins, "sites": record.sites}
    item.update({name: {"L": [{"S": value} for value in values]} for name, values in lists.items() if values})
    try:
        with translated("could not store the key"):
            dynamodb.put_item(
                TableName=settings.counts_table, Item=item, ConditionExpression="attribute_not_exists(sk)"
            )
    except ConditionFailed:
        existing = find(dynamodb, settings, key)
        assert existing is not None, "a key whose store condition failed exists"
        return key, existing
    return key, record


def find(dynamodb: DynamoDB, settings: Settings, key: str) -> KeyRecord | None:
    """The record of a well-formed key, or None."""
    if not api_keys.is_well_formed(key):
        return None
    item_key = {"pk": {"S": keyspace.ACCESS_KEY}, "sk": {"S": api_keys.digest(key)}}
    item = dynamo.get_item(dynamodb, settings.counts_table, item_key, "could not read the key")
    return None if item is None else _record(item)


def page_keys(dynamodb: DynamoDB, settings: Settings, params: Mapping[str, str]) -> tuple[list[KeyRecord], str | None]:
    """One page (core.pager) of keys in the order of their hashes (stable, not by age), and the next cursor."""
    request = pager.page_request(params, _digest)
    page = pager.query_page(dynamodb, settings.counts_table, keyspace.ACCESS_KEY, request, "could not list the keys")
    return [_record(item) for item in page.items], page.next


def all_keys(dynamodb: DynamoDB, settings: Settings) -> Iterator[KeyRecord]:
    """Every key, in the order of their hashes (for tools; the API answers one page a request)."""
    request = dynamo.query_request(settings.counts_table, keyspace.ACCESS_KEY)
    for page in dynamo.query_pages(dynamodb, request, "could not list the keys"):
        yield from map(_record, page.get("Items", []))


def _digest(position: str) -> None:
    if not api_keys.DIGEST_PATTERN.fullmatch(position):
        raise ValidationError("not a key hash")


def revoke(dynamodb: DynamoDB, settings: Settings, key_id: str, now_ms: int) -> KeyRecord:
    """Mark a key revoked (idempotent: the first revocation time stays)."""
    if not api_keys.ID_PATTERN.fullmatch(key_id):
        raise ValidationError("a key id is 16 hex digits, as GET /keys lists them")
    request = dynamo.query_request(
        settings.counts_table, keyspace.ACCESS_KEY, sk="begins_with(sk, :id)", values={":id": key_id}
    )
    items = dynamo.query_items(dynamodb, request, "could not find the key")
    if not items:
        raise NotFoundError(f"no key with id {key_id}")
    for item in items:  # ids are 64 bits of the hash: two keys sharing one would both go
        with translated("could not revoke the key"):
            updated = dynamodb.update_item(
                TableName=settings.counts_table,
                Key={"pk": item["pk"], "sk": item["sk"]},
                UpdateExpression="SET revoked_ms = if_not_exists(revoked_ms, :now)",
                ExpressionAttributeValues={":now": {"N": str(now_ms)}},
                ReturnValues="ALL_NEW",
            )
    return _record(updated["Attributes"])


def _record(item: dict[str, Any]) -> KeyRecord:
    return KeyRecord(
        id=attributes.text(item, "id"),
        scopes=attributes.string_set(item, "scopes"),
        prefix=attributes.optional_text(item, "prefix"),
        origins=attributes.text_list(item, "origins"),
        note=attributes.text(item, "note"),
        created_ms=attributes.integer(item, "created_ms"),
        revoked_ms=attributes.optional_integer(item, "revoked_ms"),
        sites=attributes.text_list(item, "sites"),
        rate_per_second=attributes.integer(item, "rate_per_second"),
    )


class CachedLookup:
    """Key records remembered for `ttl_seconds` (what the gateway authorizer's cache does for
    header keys, for the beacon routes, which the gateway does not authorize)."""

    def __init__(self, find_key: Callable[[str], KeyRecord | None], ttl_seconds: int, size: int = 1000) -> None:
        self._find = find_key
        # Held under this lookup as the client, each record in a 1-tuple: a key found to be no key is remembered too.
        self._held: ClientCache[str, tuple[KeyRecord | None]] = ClientCache(size, ttl_seconds * 1000)

    def __call__(self, key: str) -> KeyRecord | None:
        return self._held.fetch(self, key, int(time.monotonic() * 1000), lambda: (self._find(key),))[0]
