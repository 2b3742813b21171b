"""The audit items: what the counting path did with each events partition. Pure. Their format,
and why every stored event ends up in exactly one number, once: docs/counting.md, "The audit"
and "The proof"."""

from __future__ import annotations

from typing import Any

from chalicelib.core import attributes, keyspace
from chalicelib.counters.layout import item_key

APPLIED = "applied"
SET_ASIDE = "set_aside"
EXPIRED = "expired"
REPAIRED = "repaired"
DUPLICATES = "duplicates"
# The numbers the stream handler (and replay) write; REPAIRED is the repair's own.
STREAM_ACCOUNTS = (APPLIED, SET_ASIDE, EXPIRED, DUPLICATES)
ACCOUNTS = (*STREAM_ACCOUNTS, REPAIRED)
# Longer than the stream's 24-hour retention plus the audit's settle margin and a week of
# operator reaction; the audit reads an item long before it expires.
AUDIT_TALLY_TTL_SECONDS = 8 * 86400
REPAIRS_SORT_KEY = "#repaired"


def split(events_pk: str) -> tuple[str, str]:
    """(group, member) of an events partition key: the parts before and after its last `#`."""
    group, sep, member = events_pk.rpartition("#")
    return (group, member) if sep else (events_pk, "")


def group_pk(events_pk: str) -> str:
    """The partition key of the audit items of an events partition's group."""
    return f"{keyspace.AUDIT_GROUP}{split(events_pk)[0]}"


def shard_item_key(events_pk: str, shard_attribute: str) -> dict[str, Any]:
    """The item in which one stream shard accounts for P's group (ValueError if DynamoDB would refuse the key)."""
    return item_key(group_pk(events_pk), shard_attribute)


def repairs_key(events_pk: str) -> dict[str, Any]:
    """The item holding what the repair accounted for in P's group."""
    return item_key(group_pk(events_pk), REPAIRS_SORT_KEY)


def attribute(account: str, events_pk: str) -> str:
    """The attribute holding one of P's numbers on an item of its group."""
    return f"{account}#{split(events_pk)[1]}"


def member_accounts(item: dict[str, Any], events_pk: str) -> dict[str, int]:
    """P's numbers on one item of its group."""
    return {name: attributes.integer(item, attribute(name, events_pk), 0) for name in ACCOUNTS}


def group_accounts(items: list[dict[str, Any]], events_pk: str) -> dict[str, int]:
    """P's numbers summed over the items of its group."""
    numbers = [member_accounts(i, events_pk) for i in items]
    return {name: sum(n[name] for n in numbers) for name in ACCOUNTS}


def accounted(numbers: dict[str, int]) -> int:
    return sum(numbers.get(name, 0) for name in ACCOUNTS)
