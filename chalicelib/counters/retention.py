"""Which stored buckets an answer may use, and from when it is complete. Pure: no I/O.

The rule. A bucket keeps its counts until its end plus the retention of its events
(`expires_at`, stored on the item; with mixed retentions the longest, see stream_apply). The
minutes of an hour live inside the hour's item, so they go with it. A day therefore outlives
its hours by up to a day: coarser buckets are kept longer, as time-series stores keep
downsampled data longer than raw points. Reads ignore a bucket past its expiry even before
DynamoDB deletes it.

What an answer says. A window is read as parts (days, hours, minutes of an hour; see
timebuckets.plan) and a histogram as buckets, both in time order. A part is *kept* when its
item is there and not expired, or when it is absent (no events) and would not have expired
yet by the counter's retention (the longest retention among the items read, or the default:
an absent item past that may have been deleted). The answer counts exactly the parts from the
first one after which every part is kept: `retained_from` is that part's start, `complete`
says it is the window's start. So `count` is always the number of events in
[retained_from, end), whatever the window's alignment; an older part that happens to be kept
(a day that outlives the hours around it, or a longer retention) is not added to it.
"""

from __future__ import annotations

from collections.abc import Sequence

from chalicelib.core.timebuckets import Bucket


def kept(bucket: Bucket, expires_at_s: int | None, assumed_retention_s: int, now_s: int) -> bool:
    """Whether a bucket's counts may be used now: its stored expiry, or the rule if it is absent."""
    if expires_at_s is not None:
        return expires_at_s > now_s
    return bucket.end_ms // 1000 + assumed_retention_s > now_s


def kept_from(flags: Sequence[bool]) -> int:
    """Index of the first part of the suffix in which every part is kept (len if the last is not)."""
    index = len(flags)
    while index > 0 and flags[index - 1]:
        index -= 1
    return index
