"""Top URLs in storage: the queue handler's summary updates, and GET /views/top.

A summary (chalicelib.views.top) is two items per view bucket, under `VTOP#<h|d|b>#<index>`:
the base `S` (`e` the packed entries, at most 13,000 bytes, `f` its floor) and the delta `D`
(`e` snapshots observed since the base was last written, at most DELTA_ENTRIES of them), each
with a version `v` and `expires_at` as the bucket's. The summary is the base with the delta's
snapshots observed into it: a snapshot is the same wherever it waits, and the summary's
guarantees hold whatever order snapshots are observed in. A batch's snapshots that change the
summary go to the delta, one small write, until the delta is full; then the summary with them
is written as the base and the delta emptied (its entries, if another handler added to it
meanwhile, stay: observed again, they change nothing). So a batch that changes a busy summary
writes about a thousandth of a 13 KB item, not all of it. Each item is written under an
optimistic lock: read both (strongly consistent), write on the condition that `v` is still what
was read; a handler that lost the race reads both again and observes again. A summary nothing
in the batch changes is not written (a redelivered batch costs reads only).

A read of the top URLs of hours first..last reads (all numbers are items):
- the summaries of the window's whole blocks, days and hours: at most top.MAX_SPANS (118) base
  and delta pairs for any window up to 400 days, one BatchGetItem call per 100;
- per candidate examined (at most `limit` + EXTRA_EXAMINED): three Queries of the views catalog
  (its digest to its sha256, view_catalog.shas_of: the page holding it, one item), its counter item (the URL's text) and its
  exact views in the window from its counter and its own buckets (at most api.MAX_KEYS, 19);
- the views catalog's log items not folded yet, once per batch of candidates.
So at most 236 + (limit + 100) x 21 items and the unfolded log, whatever the number of views or URLs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chalicelib.core import (
    attributes,
    clock,
    dynamo,
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
DELTA_SK = "D"
DELTA_ENTRIES = 64  # 832 bytes of entries: a delta write stays one write unit
MAX_ATTEMPTS = 8
EXTRA_EXAMINED = 100


def summary_key(span: Span, sk: str = SUMMARY_SK) -> dict[str, Any]:
    return {"pk": {"S": keyspace.VIEW_TOP + view_keys.bucket_sk(span)}, "sk": {"S": sk}}


def delta_key(span: Span) -> dict[str, Any]:
    return summary_key(span, DELTA_SK)


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
    """Bring each bucket's summary up to the snapshots observed; returns the writes made.
    StorageError if storage fails or the lock is lost MAX_ATTEMPTS times in a row (the batch's
    messages then come back, and the snapshots are read and observed again)."""
    spans = sorted(observed.by_span)
    if not spans:
        return 0
    keys = [key for span in spans for key in (summary_key(span), delta_key(span))]
    stored = attributes.by_key(
        dynamo.batch_get_items(
            dynamodb, settings.counts_table, keys, "could not read the top URLs", sleep, consistent=True
        )
    )
    writes = 0
    for span in spans:
        pk = attributes.partition_key(summary_key(span))
        base, delta = stored.get((pk, SUMMARY_SK)), stored.get((pk, DELTA_SK))
        for attempt in range(MAX_ATTEMPTS):
            summary, version = _parse(base)
            waiting, delta_version = _parse(delta)
            for digest, count in sorted(waiting.entries.items()):
                summary.observe(digest, count)
            changed = {d: c for d, c in sorted(observed.by_span[span].items()) if summary.observe(d, c)}
            if not changed:
                break
            entries = dict(waiting.entries)
            for digest, count in changed.items():
                entries[digest] = max(entries.get(digest, 0), count)
            try:
                if len(entries) <= DELTA_ENTRIES:
                    _put(dynamodb, settings, span, DELTA_SK, top.Summary(entries), delta_version)
                    writes += 1
                else:
                    _put(dynamodb, settings, span, SUMMARY_SK, summary, version)
                    writes += 1 + _empty_delta(dynamodb, settings, span, delta_version)
                break
            except ConditionFailed:
                base, delta = _get(dynamodb, settings, span, SUMMARY_SK), _get(dynamodb, settings, span, DELTA_SK)
                (sleep or clock.sleep)(backoff(attempt, 1.0))
        else:
            raise StorageError("the top URLs of a bucket stayed contended")
    return writes


def _empty_delta(dynamodb: DynamoDB, settings: Settings, span: Span, version: int | None) -> int:
    """Empty the delta just written into the base; 0 if another handler added to it meanwhile
    (its entries stay, harmless: observed again, they change nothing)."""
    if version is None:
        return 0
    try:
        _put(dynamodb, settings, span, DELTA_SK, top.Summary(), version)
    except ConditionFailed:
        return 0
    return 1


def _parse(item: dict[str, Any] | None) -> tuple[top.Summary, int | None]:
    if not item:
        return top.Summary(capacity=top.CAPACITY), None
    packed = attributes.binary(item, "e") if "e" in item else b""
    summary = top.Summary.decode(packed, attributes.integer(item, "f", 0))
    summary.capacity = top.CAPACITY
    return summary, attributes.integer(item, "v")


def _summary(base: dict[str, Any] | None, delta: dict[str, Any] | None) -> top.Summary:
    """A bucket's summary as read: the base with the delta's snapshots observed into it."""
    summary, _ = _parse(base)
    waiting, _ = _parse(delta)
    for digest, count in sorted(waiting.entries.items()):
        summary.observe(digest, count)
    return summary


def _get(dynamodb: DynamoDB, settings: Settings, span: Span, sk: str) -> dict[str, Any] | None:
    with translated("could not read the top URLs"):
        found = dynamodb.get_item(TableName=settings.counts_table, Key=summary_key(span, sk), ConsistentRead=True)
    return dict(found["Item"]) if "Item" in found else None


def _put(
    dynamodb: DynamoDB, settings: Settings, span: Span, sk: str, summary: top.Summary, version: int | None
) -> None:
    item = {
        **summary_key(span, sk),
        "f": {"N": str(summary.floor)},
        "v": {"N": str((version or 0) + 1)},
        "expires_at": {"N": str(timebuckets.expires_at_s(span, settings.view_bucket_retention_seconds))},
    }
    if summary.entries:
        item["e"] = {"B": summary.encode()}
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
    keys = [key for span in spans for key in (summary_key(span), delta_key(span))]
    found = attributes.by_key(
        dynamo.batch_get_items(dynamodb, settings.counts_table, keys, "could not read the top URLs", sleep)
    )
    pks = [attributes.partition_key(k) for k in keys[::2]]
    pairs = [(found.get((pk, SUMMARY_SK)), found.get((pk, DELTA_SK))) for pk in pks]
    items = [base or delta for base, delta in pairs]
    now_s = now_ms // 1000
    retention = settings.view_bucket_retention_seconds
    first = timebuckets.kept_from(
        [timebuckets.kept(span, dynamo.stored_expiry(item), retention, now_s) for span, item in zip(spans, items)]
    )
    merged = top.merge(_summary(base, delta) for base, delta in pairs[first:] if base or delta)
    end_ms = (last_hour + 1) * times.HOUR_MS
    start_minute = spans[first].start_minute if first < len(spans) else end_ms // windows.MINUTE_MS
    reads = [len(keys)]

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
