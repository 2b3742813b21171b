"""Counts-table keys of unique counts (`HLL#`, `HLW#`, `CATALOG#uniques`), as docs/design.md,
"The counts table" lists them. Pure."""

from __future__ import annotations

from typing import Any

from chalicelib.core import attributes, catalog, keyspace
from chalicelib.core.timebuckets import Bucket, Level

PREFIX: dict[Level, str] = {"minute": "m", "quarter": "q", "hour": "h", "day": "d"}
LEVEL_OF_PREFIX: dict[str, Level] = {prefix: level for level, prefix in PREFIX.items()}
CATALOG_KIND = "uniques"


def shards_pk(name: str) -> str:
    return f"{keyspace.SKETCH}{name}"


def window_pk(name: str) -> str:
    return f"{keyspace.SKETCH_WINDOW}{name}"


def shard_key(name: str, shard: int) -> dict[str, Any]:
    return {"pk": {"S": shards_pk(name)}, "sk": {"S": f"shard#{shard:02d}"}}


def bucket_sort_key(resolution: Level, index: int) -> str:
    return keyspace.index_sort_key(PREFIX[resolution], index)


def bucket_key(name: str, bucket: Bucket) -> dict[str, Any]:
    return {"pk": {"S": window_pk(name)}, "sk": {"S": bucket_sort_key(bucket.resolution, bucket.index)}}


def bucket_of(item: dict[str, Any]) -> Bucket:
    """The bucket of a window sketch's item, read from its sort key (bucket_sort_key)."""
    sort_key = attributes.sort_key(item)
    return Bucket(LEVEL_OF_PREFIX[sort_key.split("#", 1)[0]], keyspace.sort_key_index(sort_key))


def name_key(name: str) -> dict[str, Any]:
    return {"pk": {"S": catalog.catalog_pk(CATALOG_KIND)}, "sk": {"S": name}}
