"""The audit's record of what the counting path did with each events partition. Pure.

An events-table partition key P is `<quarter hour of ingest>#<write shard>` (events/ingest.py):
its GROUP is the part before the last `#` (the quarter hour) and its MEMBER the part after (the
write shard). The stream handler writes one item per group and stream shard, holding the numbers
of every member that shard carried, so a batch costs one small write per quarter hour it
touches (usually one), not one per events partition:

    pk = AUQ#<group>, sk = s:<stream shard hash>
    applied#<member>     N   events of P counted, or found already counted
    duplicates#<member>  N   the second copy of a client id (a retried POST stores two items)
    set_aside#<member>   N   events of P put aside under QUARANTINE#events-stream
    expired#<member>     N   events of P not counted because every bucket of theirs had expired
    s:<stream shard>     S   how far that shard's records of the group are accounted (its position)
    expires_at           N   TTL, epoch seconds: now + AUDIT_TALLY_TTL_SECONDS at each write

The position makes the ADD idempotent: an update is sent on condition that the stored position
is below its first record, so a redelivered batch (or one cut differently) adds only what no
earlier delivery added. Replay (counters/replay.py) moves one from set_aside#<member> to
applied#<member> of the item that counted the record as set aside. The audit's repair
(counters/repair.py) alone writes the group's repairs item:

    pk = AUQ#<group>, sk = #repaired
    repaired#<member>    N   events of P the repair accounted for

Every stored event of P ends up in exactly one of the numbers, so once P's quarter hour has
closed and its records have been through the stream, their sum over P's items equals the number
of events stored under P (a pack counts its `n`); the audit (counters/audit.py) checks that.
"""

from __future__ import annotations

from typing import Any

from chalicelib.core import attributes
from chalicelib.counters import keys

SORT_KEY = "#"
APPLIED = "applied"
SET_ASIDE = "set_aside"
EXPIRED = "expired"
REPAIRED = "repaired"
# The second copy of a client id (a retried POST stores two items): stored, counted once.
DUPLICATES = "duplicates"
ACCOUNTS = (APPLIED, SET_ASIDE, EXPIRED, DUPLICATES, REPAIRED)
# Longer than the stream's 24-hour retention plus the audit's settle margin and a week of
# operator reaction; the audit reads an item long before it expires.
AUDIT_TALLY_TTL_SECONDS = 8 * 86400


REPAIRS_SORT_KEY = "#repaired"
# The numbers the stream handler (and replay) write; REPAIRED is the repair's own.
STREAM_ACCOUNTS = (APPLIED, SET_ASIDE, EXPIRED, DUPLICATES)


def split(events_pk: str) -> tuple[str, str]:
    """(group, member) of an events partition key: the parts before and after its last `#`."""
    group, sep, member = events_pk.rpartition("#")
    return (group, member) if sep else (events_pk, "")


def group_pk(events_pk: str) -> str:
    """The partition key of the audit items of an events partition's group."""
    return str(keys.audit_group_key(split(events_pk)[0], SORT_KEY)["pk"]["S"])


def shard_item_key(events_pk: str, shard_attribute: str) -> dict[str, Any]:
    """The item in which one stream shard accounts for the events of P's group (ValueError if
    DynamoDB would refuse the key)."""
    return keys.audit_group_key(split(events_pk)[0], shard_attribute)


def repairs_key(events_pk: str) -> dict[str, Any]:
    """The item holding what the repair accounted for in P's group."""
    return keys.audit_group_key(split(events_pk)[0], REPAIRS_SORT_KEY)


def attribute(account: str, events_pk: str) -> str:
    """The attribute holding one of P's numbers on an item of its group."""
    return f"{account}#{split(events_pk)[1]}"


def member_accounts(item: dict[str, Any] | None, events_pk: str) -> dict[str, int]:
    """P's numbers on one item of its group (zeros for no item)."""
    item = item or {}
    return {name: attributes.integer(item, attribute(name, events_pk), 0) for name in ACCOUNTS}


def group_accounts(items: list[dict[str, Any]], events_pk: str) -> dict[str, int]:
    """P's numbers summed over the items of its group."""
    return added(*(member_accounts(i, events_pk) for i in items))


def added(*numbers: dict[str, int]) -> dict[str, int]:
    return {name: sum(n.get(name, 0) for n in numbers) for name in ACCOUNTS}


def accounted(numbers: dict[str, int]) -> int:
    return sum(numbers.get(name, 0) for name in ACCOUNTS)
