"""Top URLs in storage: each bucket's summary as a base item plus the snapshots waiting in its block's
logs (`VTOP#`). Why no snapshot is lost and what a read costs: docs/design.md, "Top URLs" and "Log and fold"."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from chalicelib.core import attributes, dynamo, item_sizes, keyspace, log_fold, retry, timebuckets
from chalicelib.core.aws import DynamoDB
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import StorageError
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import ConditionFailed
from chalicelib.core.timebuckets import Bucket
from chalicelib.views import layout as view_layout
from chalicelib.views import markers, rollup, top

SUMMARY_SK = "S"
HEAD_SK = "E"  # on a block's partition: the mark of the block's log (core.log_fold)
LOG_PREFIX = "L#"
# A block's unfolded logs (whichever comes first) that make a writer fold them (docs/design.md, "Top URLs").
FOLD_LOGS = 64
FOLD_BYTES = 64 * 1024
MAX_ATTEMPTS = 8
READ_FAILURE = "could not read the top URLs"


def summary_key(span: Bucket, sk: str = SUMMARY_SK) -> dict[str, Any]:
    return {"pk": {"S": keyspace.VIEW_TOP + view_layout.bucket_sk(span)}, "sk": {"S": sk}}


def block_log(settings: Settings, block: Bucket) -> log_fold.Log:
    """A block's log: its items in `VTOP#b#<block>#log`, its mark the block's `E` item."""
    expires = timebuckets.expires_at_s(block, settings.view_bucket_retention_seconds)
    mark = summary_key(block, HEAD_SK)
    pk = mark["pk"]["S"] + keyspace.CATALOG_LOG
    return log_fold.Log(settings.counts_table, pk, mark, "the top URLs", LOG_PREFIX, expires)


def _log_entries(item: dict[str, Any]) -> dict[Bucket, dict[bytes, int]]:
    """A log's snapshots by bucket: one binary attribute per bucket, named by its sort key."""
    return {
        Bucket(_LEVEL_OF[name[:2]], keyspace.sort_key_index(name)): top.Summary.decode(
            attributes.binary(item, name)
        ).entries
        for name in item
        if name[:2] in _LEVEL_OF and name[2:].isdigit()
    }


_LEVEL_OF: dict[str, timebuckets.Level] = {f"{p}#": level for level, p in view_layout.BUCKET_PREFIX.items()}


# -- the queue handler's side ------------------------------------------------------------------


def record(
    dynamodb: DynamoDB, settings: Settings, observed: list[tuple[str, Bucket, int]], now_ms: int, sleep: Sleep | None
) -> int:
    """Bring each bucket's summary up to the views a batch read (URL partition, bucket, views; the
    largest per URL); returns the items written (StorageError: the messages come back, read again)."""
    blocks: dict[Bucket, dict[Bucket, dict[bytes, int]]] = {}
    for url_pk, span, count in observed:
        seen = blocks.setdefault(top.block_of(span), {}).setdefault(span, {})
        digest = top.digest_of_sha(url_pk.removeprefix(keyspace.VIEW_URL))
        seen[digest] = max(seen.get(digest, 0), count)
    return sum(_record_block(dynamodb, settings, block, blocks[block], now_ms, sleep) for block in sorted(blocks))


def _record_block(
    dynamodb: DynamoDB,
    settings: Settings,
    block: Bucket,
    observed: dict[Bucket, dict[bytes, int]],
    now_ms: int,
    sleep: Sleep | None,
) -> int:
    """One block's buckets: the snapshots that change their summaries, in a log item or the bases."""
    log = block_log(settings, block)
    logs = log.unfolded(dynamodb)
    stored = _bases(dynamodb, settings, sorted(observed))
    # Only logs past `closing` as read after them are trusted (docs/design.md, "Top URLs").
    closing = log.read_mark(dynamodb).closing
    trusted = [item for item in logs if closing is None or attributes.sort_key(item) > closing]
    waiting = _largest(trusted)
    news = {span: _uncovered(_parse(stored[span])[0], waiting.get(span, {}), seen) for span, seen in observed.items()}
    changed = {span: found for span, found in sorted(news.items()) if found}
    if not changed:
        return 0
    item = _log_item(log, changed)
    size = item_sizes.item_size(item) + 40  # and its key
    if size > top.MAX_ITEM_BYTES or markers.write_units(size) >= sum(
        _base_units(stored[s], news) for s, news in changed.items()
    ):
        return _write_bases(dynamodb, settings, changed, sleep)
    writes, written = _put_log(dynamodb, log, item, now_ms)
    if len(logs) + 1 > FOLD_LOGS or size + sum(item_sizes.item_size(i) for i in logs) > FOLD_BYTES:
        # Closed past every log read and this one, should this handler's clock be behind theirs.
        at_ms = max(log.time_of(sk) for sk in [written, *(attributes.sort_key(i) for i in logs)])
        writes += fold(dynamodb, settings, block, max(now_ms, at_ms), sleep)
    return writes


def fold(dynamodb: DynamoDB, settings: Settings, block: Bucket, now_ms: int, sleep: Sleep | None = None) -> int:
    """Observe a block's logs up to now into their buckets' base items, then mark them folded;
    returns the items written (two folds at once: docs/design.md, "Log and fold")."""
    log = block_log(settings, block)
    logs = log.close(dynamodb, now_ms)
    if not logs:
        return 0
    writes = _write_bases(dynamodb, settings, _largest(logs), sleep)
    log.folded(dynamodb, logs)
    return writes + 1


def _write_bases(
    dynamodb: DynamoDB, settings: Settings, entries: dict[Bucket, dict[bytes, int]], sleep: Sleep | None
) -> int:
    """Observe snapshots into the base items of their buckets, each under its version lock."""
    writes = 0
    for span, base in _bases(dynamodb, settings, sorted(entries)).items():
        for _ in retry.attempts(MAX_ATTEMPTS, sleep, cap=1.0):
            summary, version = _parse(base)
            if not any([summary.observe(d, c) for d, c in sorted(entries[span].items())]):
                break
            try:
                _put(dynamodb, settings, _base_item(settings, span, summary), version)
                writes += 1
                break
            except ConditionFailed:
                base = dynamo.get_item(dynamodb, settings.counts_table, summary_key(span), READ_FAILURE)
        else:
            raise StorageError("the top URLs of a bucket stayed contended")
    return writes


def _uncovered(base: top.Summary, waiting: dict[bytes, int], seen: dict[bytes, int]) -> dict[bytes, int]:
    """The snapshots neither the base nor a trusted log covers (docs/design.md, "Top URLs")."""
    return {
        digest: count
        for digest, count in sorted(seen.items())
        if count > 0 and count > base.floor and count > base.entries.get(digest, 0) and count > waiting.get(digest, 0)
    }


def _largest(logs: Sequence[dict[str, Any]]) -> dict[Bucket, dict[bytes, int]]:
    """The largest snapshot per bucket and URL waiting in these logs."""
    found: dict[Bucket, dict[bytes, int]] = {}
    for log in logs:
        for span, entries in _log_entries(log).items():
            into = found.setdefault(span, {})
            for digest, count in entries.items():
                into[digest] = max(into.get(digest, 0), count)
    return found


def _parse(item: dict[str, Any] | None) -> tuple[top.Summary, int]:
    item = item or {}
    packed = attributes.binary(item, "e") if "e" in item else b""
    summary = top.Summary.decode(packed, attributes.integer(item, "f", 0))
    summary.capacity = top.CAPACITY
    return summary, dynamo.stored_version(item)


def _summary(base: dict[str, Any] | None, logs: Sequence[dict[str, Any]], span: Bucket) -> top.Summary:
    """A bucket's summary as read: the base with its block's logs observed into it."""
    summary, _ = _parse(base)
    for log in logs:
        for digest, count in sorted(_log_entries(log).get(span, {}).items()):
            summary.observe(digest, count)
    return summary


def _base_units(base: dict[str, Any] | None, news: dict[bytes, int]) -> int:
    """About what writing a bucket's base with these snapshots costs (the larger item's size)."""
    size = item_sizes.item_size(base) if base else 100
    return markers.write_units(size + top.ENTRY_BYTES * len(news))


def _bases(
    dynamodb: DynamoDB, settings: Settings, spans: Sequence[Bucket], sk: str = SUMMARY_SK
) -> dict[Bucket, dict[str, Any] | None]:
    """The base items of `spans` (or, with HEAD_SK, the marks of these blocks' logs), read strongly."""
    keys = [summary_key(span, sk) for span in spans]
    found = attributes.by_key(
        dynamo.batch_get_items(dynamodb, settings.counts_table, keys, READ_FAILURE, consistent=True)
    )
    return {span: found.get(attributes.key_of(key)) for span, key in zip(spans, keys)}


def _log_item(log: log_fold.Log, changed: dict[Bucket, dict[bytes, int]]) -> dict[str, Any]:
    item: dict[str, Any] = {"expires_at": {"N": str(log.expires_at)}}
    for span, entries in sorted(changed.items()):
        item[view_layout.bucket_sk(span)] = {"B": top.Summary(dict(entries)).encode()}
    return item


def _put_log(dynamodb: DynamoDB, log: log_fold.Log, item: dict[str, Any], now_ms: int) -> tuple[int, str]:
    return log.append(dynamodb, item, now_ms, uuid.uuid4().hex)


def _base_item(settings: Settings, span: Bucket, summary: top.Summary) -> dict[str, Any]:
    return {
        **summary_key(span),
        "f": {"N": str(summary.floor)},
        "expires_at": {"N": str(timebuckets.expires_at_s(span, settings.view_bucket_retention_seconds))},
        **({"e": {"B": summary.encode()}} if summary.entries else {}),
    }


def _put(dynamodb: DynamoDB, settings: Settings, item: dict[str, Any], version: int | None) -> None:
    """Write a base on its version (ConditionFailed: the version moved on)."""
    dynamo.put_versioned(dynamodb, settings.counts_table, item, version, "could not write the top URLs")


# -- the readers' side ------------------------------------------------------------------------


def read(dynamodb: DynamoDB, settings: Settings, spans: Sequence[Bucket], now_ms: int) -> tuple[int, top.Merged, int]:
    """The index of the first of `spans` still kept, the kept spans' summaries merged (marks, bases,
    then logs past `folded`: docs/design.md, "Top URLs") and the items read."""
    blocks = sorted({top.block_of(span) for span in spans})
    marks = _bases(dynamodb, settings, blocks, HEAD_SK)
    bases = list(_bases(dynamodb, settings, spans).values())
    logs = {
        block: block_log(settings, block).after(dynamodb, attributes.optional_text(mark or {}, "folded"))
        for block, mark in marks.items()
    }
    first = timebuckets.kept_from([rollup.kept(settings, span, base, now_ms) for span, base in zip(spans, bases)])
    merged = top.merge(
        _summary(base, logs[top.block_of(span)], span)
        for span, base in list(zip(spans, bases))[first:]
        if base or logs[top.block_of(span)]
    )
    return first, merged, len(spans) + len(blocks) + sum(max(1, len(found)) for found in logs.values())
