"""The audit's record of what the counting path did with each events partition. Pure.

One item per events-table partition key P (quarter hour of ingest plus write shard):

    pk = AUD#<P>, sk = #
    applied    N   events of P counted, or found already counted (a client id's second copy)
    set_aside  N   events of P put aside under QUARANTINE#events-stream
    expired    N   events of P not counted because every bucket of theirs had expired
    repaired   N   events of P the audit's repair accounted for (counters/repair.py); only it
                   writes this attribute
    expires_at N   TTL, epoch seconds: now + AUDIT_TALLY_TTL_SECONDS at each write

The stream handler writes applied, set_aside and expired for every P with records in a batch,
idempotently under redelivery (a redelivered batch adds nothing), after the bucket updates of
the same records: when the item says an event was applied, its increments are stored. Replay
(counters/replay.py) moves one from set_aside to applied for each record it re-applies.

Every stored event of P ends up in exactly one of the four numbers, so once P's quarter hour
has closed and its records have been through the stream, applied + set_aside + expired +
repaired equals the number of events stored under P (a pack counts its `n`); the audit
(counters/audit.py) checks that.
"""

from __future__ import annotations

from typing import Any

from chalicelib.core import attributes, keyspace
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


def tally_key(events_pk: str) -> dict[str, Any]:
    """The audit item of one events partition key (ValueError if DynamoDB would refuse the key)."""
    return keys.audit_key(events_pk)


def events_pk_of(tally_pk: str) -> str:
    """The events partition key an audit item's pk names."""
    if not tally_pk.startswith(keyspace.AUDIT):
        raise ValueError(f"not an audit item: {tally_pk!r}")
    return tally_pk[len(keyspace.AUDIT) :]


def accounts(item: dict[str, Any] | None) -> dict[str, int]:
    """The four numbers of a stored audit item (DynamoDB JSON); zeros for no item."""
    item = item or {}
    return {name: attributes.integer(item, name, 0) for name in ACCOUNTS}
