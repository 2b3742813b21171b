"""Top URLs in storage: the queue handler's summary updates, and GET /views/top.

A bucket's summary (chalicelib.views.top) is its base item `VTOP#<h|d|b>#<index>` / `S` (`e` the
packed entries, at most 13,000 bytes, `f` its floor, a version `v`) with the snapshots of its
block's logs observed into it. A snapshot is the same wherever it waits, and the summary's
guarantees hold in any order of observation, so a snapshot may wait in a log as well as in
the base.

Logs. A batch's snapshots that change its buckets' summaries (the hours, days and block its
views fall in) go into one new item of their 32-day block, `VTOP#b#<block>` / `L#<epoch>#<id>`
(one binary attribute per bucket, named by its sort key): one write unit for a small batch,
whatever the number of buckets, where a write per bucket would cost one each. When the logs of the
block's current epoch pass FOLD_LOGS items or FOLD_BYTES, the handler folds: it observes the
logs of the current epoch and the one before into the base items of their buckets (each under
its version lock) and then moves the epoch, `VTOP#b#<block>` / `E` `v`, on by one (on the
condition that it is still what was read). Readers read the logs of the epoch they read and
of the one before, so a fold makes older logs unread; they are never deleted (a delete would
cost what the log did) and expire with the block.

Why no snapshot is lost. A log tagged with epoch e is written after its writer read the epoch
as e, and is then read again (strongly consistent): if it is still e, any fold that moves the
epoch from e+1 to e+2 read e+1 after that, so its Query (strongly consistent) returns the log,
which it observes into the bases before moving on; the fold from e to e+1 may miss it, but
readers read epochs e and e+1. If the epoch moved on, the writer observes again against what
is stored then and writes again (a log that was missed is a harmless repeat when read). So
once the handler returns, every snapshot it reported is in a base or in a log readers read.
Only logs of the epoch just read (and read again after the Query) are trusted to hold a
snapshot when deciding what is new: one of the epoch before may belong to a writer that is
about to find the epoch moved on. And a snapshot is new unless the base already covers it
(holds its URL with as many views, or has a floor as high) or a trusted log holds
one at least as large for its URL (`_uncovered`), which holds whatever order a reader
observes the logs in. A batch nothing new in is not written at all (a redelivered
batch costs reads only), and a batch whose log would cost more write units than its buckets'
bases, or would pass 16 KB (top.MAX_ITEM_BYTES, as no summary item does), writes those bases
directly. A handler that dies anywhere leaves its messages, whose
redelivery reads and reports again.

A read of the top URLs of hours first..last reads, strongly consistent, the epochs, then the
bases, then the logs: the order opposite to a fold's writes, so a moved epoch comes with the
bases that fold observed its older logs into (all numbers are items):
- the summaries of the window's whole blocks, days and hours: at most top.MAX_SPANS (118) base
  items for any window up to 400 days, with the epoch of each block they lie in
  (at most top.MAX_BLOCKS, 14), one BatchGetItem call per 100; then one Query per block for its logs of two
  epochs (about 2 x FOLD_LOGS small items at most, or 2 x FOLD_BYTES, while handlers fold);
- per candidate examined (at most `limit` + EXTRA_EXAMINED): three Queries of the views catalog
  (its digest to its sha256, view_catalog.shas_of: the page holding it, one item), its counter
  item (the URL's text) and its exact views in the window from its counter and its own buckets
  (at most api.MAX_KEYS, 19);
- the views catalog's log items not folded yet, once per batch of candidates.
So at most 132 items and 14 log Queries + (limit + 100) x 21 items and the catalog's unfolded
log, whatever the number of views or URLs.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from chalicelib.core import (
    attributes,
    clock,
    dynamo,
    item_sizes,
    keyspace,
    pager,
    timebuckets,
    times,
    window_params,
)
from chalicelib.core.aws import DynamoDB
from chalicelib.core.clock import Sleep
from chalicelib.core.errors import StorageError
from chalicelib.core.retry import backoff
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import ConditionFailed, translated
from chalicelib.views import api, top, windows
from chalicelib.views import catalog as view_catalog
from chalicelib.views import keys as view_keys
from chalicelib.views import validation as view_input
from chalicelib.views.windows import Span

SUMMARY_SK = "S"
HEAD_SK = "E"  # on a block's partition: the block's log epoch
LOG_PREFIX = "L#"
# A block's logs of its current epoch that make a writer fold them into the bases: whichever
# comes first, so a reader's Query of a block's logs stays a few pages at most.
FOLD_LOGS = 64
FOLD_BYTES = 64 * 1024
MAX_ATTEMPTS = 8
EXTRA_EXAMINED = 100


def summary_key(span: Span, sk: str = SUMMARY_SK) -> dict[str, Any]:
    return {"pk": {"S": keyspace.VIEW_TOP + view_keys.bucket_sk(span)}, "sk": {"S": sk}}


def head_key(block: Span) -> dict[str, Any]:
    return summary_key(block, HEAD_SK)


def log_sk(epoch: int, name: str) -> str:
    return f"{LOG_PREFIX}{epoch:010d}#{name}"


def _epoch(item: dict[str, Any] | None) -> int:
    return attributes.integer(item, "v", 0) if item else 0


def _log_epoch(item: dict[str, Any]) -> int:
    return int(attributes.sort_key(item)[len(LOG_PREFIX) : len(LOG_PREFIX) + 10])


def _log_entries(item: dict[str, Any]) -> dict[Span, dict[bytes, int]]:
    """A log's snapshots by bucket: one binary attribute per bucket, named by its sort key."""
    found: dict[Span, dict[bytes, int]] = {}
    for name in item:
        level = _LEVEL_OF.get(name[:2])
        if level is not None and name[2:].isdigit():
            found[Span(level, keyspace.sort_key_index(name))] = top.Summary.decode(
                attributes.binary(item, name)
            ).entries
    return found


_LEVEL_OF: dict[str, windows.Level] = {f"{p}#": level for level, p in view_keys.BUCKET_PREFIX.items()}  # type: ignore[misc]


# -- the queue handler's side ------------------------------------------------------------------


class Observations:
    """Snapshots of URLs' views per bucket, as a batch read them (the largest per URL)."""

    def __init__(self) -> None:
        self.by_span: dict[Span, dict[bytes, int]] = {}

    def add(self, bucket_pk: str, span: Span, count: int) -> None:
        digest = top.digest_of_sha(bucket_pk.removeprefix(keyspace.VIEW_BUCKET))
        seen = self.by_span.setdefault(span, {})
        if count > seen.get(digest, 0):
            seen[digest] = count


def record(dynamodb: DynamoDB, settings: Settings, observed: Observations, sleep: Sleep | None = None) -> int:
    """Bring each bucket's summary up to the snapshots observed; returns the items written.
    StorageError if storage
    fails or a block's epoch keeps moving MAX_ATTEMPTS times in a row (the batch's messages
    then come back, and the snapshots are read and observed again)."""
    blocks: dict[Span, dict[Span, dict[bytes, int]]] = {}
    for span, seen in observed.by_span.items():
        blocks.setdefault(top.block_of(span), {})[span] = seen
    return sum(_record_block(dynamodb, settings, block, blocks[block], sleep) for block in sorted(blocks))


def _record_block(
    dynamodb: DynamoDB,
    settings: Settings,
    block: Span,
    observed: dict[Span, dict[bytes, int]],
    sleep: Sleep | None,
) -> int:
    """One block's buckets: the snapshots that change their summaries go into one new log item
    of the block (or, when that would be larger than the summaries themselves, into the base
    items directly); see the module's docstring for why a log is never lost."""
    writes = 0
    for attempt in range(MAX_ATTEMPTS):
        epoch = _epoch(_get(dynamodb, settings, head_key(block)))
        logs = _logs(dynamodb, settings, block, epoch, consistent=True)
        stored = _bases(dynamodb, settings, sorted(observed), consistent=True)
        # Only logs of the epoch read are trusted to hold a snapshot: one of the epoch before
        # may belong to a writer that finds the epoch moved on and writes it again.
        current = [log for log in logs if _log_epoch(log) == epoch]
        changed: dict[Span, dict[bytes, int]] = {}
        for span in sorted(observed):
            news = _uncovered(_parse(stored[span])[0], _waiting(current, span), observed[span])
            if news:
                changed[span] = news
        logged = False
        if changed:
            log = _log_item(settings, block, epoch, changed)
            size = item_sizes.item_size(log)
            if size > top.MAX_ITEM_BYTES or _units(size) >= sum(
                _base_units(stored[span], news) for span, news in changed.items()
            ):
                writes += _write_bases(dynamodb, settings, changed, sleep)
            else:
                _put_log(dynamodb, settings, log)
                writes, logged = writes + 1, True
                current.append(log)
        if _epoch(_get(dynamodb, settings, head_key(block))) == epoch:
            size = sum(item_sizes.item_size(log) for log in current)
            if logged and (len(current) > FOLD_LOGS or size > FOLD_BYTES):
                writes += fold(dynamodb, settings, block, sleep)
            return writes
        # A fold moved the epoch on meanwhile, and may not have read this batch's log (nor the
        # logs it trusted): observe again against what is stored now.
        (sleep or clock.sleep)(backoff(attempt, 1.0))
    raise StorageError("the top URLs of a block stayed contended")


def fold(dynamodb: DynamoDB, settings: Settings, block: Span, sleep: Sleep | None = None) -> int:
    """Observe a block's logs of its current epoch and the one before into the base items of
    their buckets, then move the epoch on (so readers skip what was folded); returns the items
    written. Another handler folding at the same time is harmless: bases only take snapshots
    under their version lock, and one of the two moves the epoch."""
    head = _get(dynamodb, settings, head_key(block))
    epoch = _epoch(head)
    entries: dict[Span, dict[bytes, int]] = {}
    for log in _logs(dynamodb, settings, block, epoch, consistent=True):
        for span, found in _log_entries(log).items():
            into = entries.setdefault(span, {})
            for digest, count in found.items():
                into[digest] = max(into.get(digest, 0), count)
    writes = _write_bases(dynamodb, settings, entries, sleep)
    item = {
        **head_key(block),
        "v": {"N": str(epoch + 1)},
        "expires_at": {"N": str(timebuckets.expires_at_s(block, settings.view_bucket_retention_seconds))},
    }
    try:
        _put(dynamodb, settings, item, None if head is None else epoch)
    except ConditionFailed:
        return writes  # another fold moved the epoch on: it read at least what this one did
    return writes + 1


def _write_bases(
    dynamodb: DynamoDB, settings: Settings, entries: dict[Span, dict[bytes, int]], sleep: Sleep | None
) -> int:
    """Observe snapshots into the base items of their buckets, each under its version lock."""
    writes = 0
    spans = sorted(entries)
    stored = _bases(dynamodb, settings, spans, consistent=True)
    for span in spans:
        base = stored[span]
        for attempt in range(MAX_ATTEMPTS):
            summary, version = _parse(base)
            if not any([summary.observe(d, c) for d, c in sorted(entries[span].items())]):
                break
            try:
                _put(dynamodb, settings, _base_item(settings, span, summary, version), version)
                writes += 1
                break
            except ConditionFailed:
                base = _get(dynamodb, settings, summary_key(span))
                (sleep or clock.sleep)(backoff(attempt, 1.0))
        else:
            raise StorageError("the top URLs of a bucket stayed contended")
    return writes


def _uncovered(base: top.Summary, waiting: dict[bytes, int], seen: dict[bytes, int]) -> dict[bytes, int]:
    """The snapshots a reader could not be sure to cover without them. A snapshot (d, c) is
    covered when the base holds d with at least c or has a floor of at least c (a reader starts
    from the base, and observing more only raises a held count or the floor, evicting at most to
    the floor), or when a snapshot of d of at least c waits where every reader observes it. The
    summary as it would be after this batch's other snapshots is not relied on: that argument
    would depend on the order a reader observes the logs in."""
    return {
        digest: count
        for digest, count in sorted(seen.items())
        if count > 0 and count > base.floor and count > base.entries.get(digest, 0) and count > waiting.get(digest, 0)
    }


def _waiting(logs: Sequence[dict[str, Any]], span: Span) -> dict[bytes, int]:
    """The largest snapshot per URL of a bucket waiting in these logs."""
    found: dict[bytes, int] = {}
    for log in logs:
        for digest, count in _log_entries(log).get(span, {}).items():
            found[digest] = max(found.get(digest, 0), count)
    return found


def _parse(item: dict[str, Any] | None) -> tuple[top.Summary, int | None]:
    if not item:
        return top.Summary(capacity=top.CAPACITY), None
    packed = attributes.binary(item, "e") if "e" in item else b""
    summary = top.Summary.decode(packed, attributes.integer(item, "f", 0))
    summary.capacity = top.CAPACITY
    return summary, attributes.integer(item, "v")


def _summary(base: dict[str, Any] | None, logs: Sequence[dict[str, Any]], span: Span) -> top.Summary:
    """A bucket's summary as read: the base with the snapshots of the block's logs observed
    into it."""
    summary, _ = _parse(base)
    for log in logs:
        for digest, count in sorted(_log_entries(log).get(span, {}).items()):
            summary.observe(digest, count)
    return summary


def _units(size: int) -> int:
    """Write units of an item of `size` bytes: one per started kilobyte."""
    return max(1, -(-size // item_sizes.KB))


def _base_units(base: dict[str, Any] | None, news: dict[bytes, int]) -> int:
    """About what writing a bucket's base with these snapshots costs (the larger of the item
    before and after): a log is written instead only when it costs less."""
    size = item_sizes.item_size(base) if base else 100
    return _units(size + top.ENTRY_BYTES * len(news))


def _bases(
    dynamodb: DynamoDB, settings: Settings, spans: Sequence[Span], consistent: bool
) -> dict[Span, dict[str, Any] | None]:
    keys = [summary_key(span) for span in spans]
    found = attributes.by_key(
        dynamo.batch_get_items(
            dynamodb, settings.counts_table, keys, "could not read the top URLs", consistent=consistent
        )
    )
    return {span: found.get((attributes.partition_key(key), SUMMARY_SK)) for span, key in zip(spans, keys)}


def _logs(dynamodb: DynamoDB, settings: Settings, block: Span, epoch: int, consistent: bool) -> list[dict[str, Any]]:
    """A block's logs of `epoch` and the one before (older ones were folded into the bases)."""
    request = {
        "TableName": settings.counts_table,
        "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
        "ExpressionAttributeValues": {
            ":pk": head_key(block)["pk"],
            ":lo": {"S": log_sk(max(epoch - 1, 0), "")},
            ":hi": {"S": LOG_PREFIX + "~"},
        },
        "ConsistentRead": consistent,
    }
    return [
        dict(item)
        for page in dynamo.query_pages(dynamodb, request, "could not read the top URLs")
        for item in page.get("Items", [])
    ]


def _log_item(settings: Settings, block: Span, epoch: int, changed: dict[Span, dict[bytes, int]]) -> dict[str, Any]:
    item: dict[str, Any] = {
        "pk": head_key(block)["pk"],
        "sk": {"S": log_sk(epoch, uuid.uuid4().hex)},
        "expires_at": {"N": str(timebuckets.expires_at_s(block, settings.view_bucket_retention_seconds))},
    }
    for span, entries in sorted(changed.items()):
        item[view_keys.bucket_sk(span)] = {"B": top.Summary(dict(entries)).encode()}
    return item


def _put_log(dynamodb: DynamoDB, settings: Settings, item: dict[str, Any]) -> None:
    with translated("could not write the top URLs"):
        dynamodb.put_item(TableName=settings.counts_table, Item=item)


def _get(dynamodb: DynamoDB, settings: Settings, key: dict[str, Any]) -> dict[str, Any] | None:
    with translated("could not read the top URLs"):
        found = dynamodb.get_item(TableName=settings.counts_table, Key=key, ConsistentRead=True)
    return dict(found["Item"]) if "Item" in found else None


def _base_item(settings: Settings, span: Span, summary: top.Summary, version: int | None) -> dict[str, Any]:
    item = {
        **summary_key(span),
        "f": {"N": str(summary.floor)},
        "v": {"N": str((version or 0) + 1)},
        "expires_at": {"N": str(timebuckets.expires_at_s(span, settings.view_bucket_retention_seconds))},
    }
    if summary.entries:
        item["e"] = {"B": summary.encode()}
    return item


def _put(dynamodb: DynamoDB, settings: Settings, item: dict[str, Any], version: int | None) -> None:
    """Write a base or a head on the condition that its version `v` is still `version` (None:
    that there is none yet)."""
    condition: dict[str, Any] = (
        {"ConditionExpression": "attribute_not_exists(pk)"}
        if version is None
        else {"ConditionExpression": "v = :v", "ExpressionAttributeValues": {":v": {"N": str(version)}}}
    )
    with translated("could not write the top URLs"):  # ConditionFailed: the version moved on
        dynamodb.put_item(TableName=settings.counts_table, Item=item, **condition)


# -- GET /views/top --------------------------------------------------------------------------


def parse_query(params: Mapping[str, str]) -> tuple[int, str | None]:
    """`limit` (1-1000, default 10) and the optional URL `prefix` of GET /views/top."""
    limit = pager.page_limit(params.get("limit"), top.DEFAULT_LIMIT, top.MAX_LIMIT)
    prefix = params.get("prefix")
    return limit, None if prefix is None else view_input.text(prefix, "prefix", view_input.URL_MAX_CHARS)


def top_urls(
    dynamodb: DynamoDB,
    settings: Settings,
    hours: tuple[int, int],
    limit: int,
    prefix: str | None,
    now_ms: int,
    sleep: Sleep | None = None,
) -> dict[str, Any]:
    """The `limit` most viewed URLs (starting with `prefix`, if given) in hours first..last,
    with their exact views (see the module's docstring for what it reads)."""
    first_hour, last_hour = hours
    window_params.check_hours(first_hour, last_hour)
    spans = top.cover(first_hour, last_hour)
    blocks = sorted({top.block_of(span) for span in spans})
    keys = [summary_key(span) for span in spans]
    # In the order opposite to a fold's writes (bases, then the epoch), strongly consistent: a
    # fold that moved an epoch read here had observed its older logs into bases read after it.
    heads = attributes.by_key(
        dynamo.batch_get_items(
            dynamodb,
            settings.counts_table,
            [head_key(block) for block in blocks],
            "could not read the top URLs",
            sleep,
            consistent=True,
        )
    )
    found = attributes.by_key(
        dynamo.batch_get_items(
            dynamodb, settings.counts_table, keys, "could not read the top URLs", sleep, consistent=True
        )
    )
    bases = [found.get((attributes.partition_key(key), SUMMARY_SK)) for key in keys]
    logs: dict[Span, list[dict[str, Any]]] = {}
    for block in blocks:
        head = heads.get((attributes.partition_key(head_key(block)), HEAD_SK))
        logs[block] = _logs(dynamodb, settings, block, _epoch(head), consistent=True)
    now_s = now_ms // 1000
    retention = settings.view_bucket_retention_seconds
    first = timebuckets.kept_from(
        [timebuckets.kept(span, dynamo.stored_expiry(base), retention, now_s) for span, base in zip(spans, bases)]
    )
    merged = top.merge(
        _summary(base, logs[top.block_of(span)], span)
        for span, base in list(zip(spans, bases))[first:]
        if base or logs[top.block_of(span)]
    )
    end_ms = (last_hour + 1) * times.HOUR_MS
    start_minute = spans[first].start_minute if first < len(spans) else end_ms // windows.MINUTE_MS
    reads = [len(keys) + len(blocks) + sum(max(1, len(found)) for found in logs.values())]

    def resolve(digests: Sequence[bytes]) -> dict[bytes, list[tuple[str, int]]]:
        urls = _urls_of(dynamodb, settings, digests, reads, sleep)
        wanted = [url for found in urls.values() for url in found if prefix is None or url.startswith(prefix)]
        views = api.count_urls(dynamodb, settings, wanted, start_minute, end_ms // windows.MINUTE_MS - 1, now_ms, sleep)
        reads[0] += views.keys_read
        return {d: [(url, views.views[url]) for url in found if url in views.views] for d, found in urls.items()}

    selection = top.select(merged, limit, resolve, limit + EXTRA_EXAMINED, filtered=prefix is not None)
    answer: dict[str, Any] = {
        "start": times.iso(first_hour * times.HOUR_MS),
        "end": times.iso(end_ms),
        "exact": selection.exact,
        "bound": selection.bound,
        "urls": [{"url": url, "views": views} for url, views in selection.urls],
        "others": {
            "urls": selection.others[0],
            "views": selection.others[1],
            "complete": selection.others_complete,
        },
        "keys_read": reads[0],
        "complete": first == 0,
    }
    if prefix is not None:
        answer["prefix"] = prefix
    if first:
        answer["retained_from"] = times.iso(start_minute * windows.MINUTE_MS)
        answer["message"] = "the window starts before what is kept: the answer counts retained_from to end"
    return answer


def _urls_of(
    dynamodb: DynamoDB,
    settings: Settings,
    digests: Sequence[bytes],
    reads: list[int],
    sleep: Sleep | None,
) -> dict[bytes, list[str]]:
    """The URLs with these digests: the views catalog names each URL's sha256 (view_catalog.shas_of),
    its counter item holds the text."""
    by_prefix, read = view_catalog.shas_of(dynamodb, settings, [d.hex() for d in digests], clock.now_ms())
    shas = {digest: by_prefix[digest.hex()] for digest in digests}
    reads[0] += read
    keys = [
        {"pk": {"S": keyspace.VIEW_URL + sha}, "sk": {"S": view_keys.COUNTER_SK}}
        for found in shas.values()
        for sha in found
    ]
    reads[0] += len(keys)
    texts = {
        attributes.partition_key(item).removeprefix(keyspace.VIEW_URL): attributes.text(item, "url")
        for item in dynamo.batch_get_items(
            dynamodb, settings.counts_table, keys, "could not read the view counters", sleep
        )
        if "url" in item
    }
    return {digest: [texts[sha] for sha in found if sha in texts] for digest, found in shas.items()}
