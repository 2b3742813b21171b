"""The bucket writes: a set of a shard's events added to one bucket item, exactly once
(`apply_item`); `increment` is the update itself, which the quarantine replay sends too. Why this
is exact: docs/counting.md, "The proof", "Inline minutes" and "Item sizes" (value names)."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from chalicelib.core import attributes, decimals, dynamo, keyspace, timebuckets
from chalicelib.core.aws import DynamoDB
from chalicelib.core.batch_processor import Sent
from chalicelib.core.client_cache import ClientCache
from chalicelib.core.errors import StorageError
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import ConditionFailed, condition_item, translated
from chalicelib.core.timebuckets import Bucket
from chalicelib.counters import layout
from chalicelib.counters.countable import Countable, Touch
from chalicelib.events.ingest import Event

# An item's stored position can only move the records still to send forward: more rounds than
# this on one item means the stored state is not what this code writes.
MAX_ROUNDS = 8

LISTED = "listed"  # the mark of the records whose counter's listing a batch writes (follow_ups)
INLINE = "inline"  # the mark of the events a day item holds inline (layout.INLINE_MAX)


@dataclass
class _Rounds:
    """What the rounds of one item's update have learnt."""

    before: str = ""  # this shard's stored position
    keep_stored: bool = False  # the stored retention is the longer
    found: list[Countable] = field(default_factory=list)  # the records held already
    beyond: list[Countable] = field(default_factory=list)  # of those, the ones an update skipped
    inline: list[Countable] = field(default_factory=list)  # the records held inline
    calls: int = 0
    spill: str | None = ""  # a day item's stored `x:`: UNKNOWN until read, None when absent
    inline_count: int = 0  # a day item's stored inline count
    slots: dict[int, str] | None = None  # the value names the item sums by slot, once read (or a hint)
    taken: dict[int, str] = field(default_factory=dict)  # the slots the last update sent uses

    def marks(self, listed: bool = False, applied: Sequence[Countable] = ()) -> dict[str, Sequence[Countable]]:
        listing = {LISTED: [*self.found, *applied]} if listed else {}
        return {"found_applied": self.found, "beyond": self.beyond, INLINE: self.inline, **listing}


UNKNOWN = ""  # _Rounds.spill before the item was read


# Per DynamoDB client, what this process last saw of an item (and shard), so the next update
# starts from it, not from a guess whose cancelled condition costs a write. Held with no age limit:
# a hint, which the condition checks. A day item's `x:` of a shard once past NOT_SPILLED never goes back
# (only a prune removes it), so the next update goes straight to the hours' mode.
_spilled: ClientCache[tuple[str, ...], str] = ClientCache(100_000, sys.maxsize)
# The value names each bucket item was last seen to sum, by slot.
_slot_hints: ClientCache[tuple[str, str], dict[int, str]] = ClientCache(100_000, sys.maxsize)


def _day_mode(rounds: _Rounds, members: list[Countable]) -> str:
    """How a day item takes this shard's next events: `inline`, `spill` or `spilled` (docs/counting.md,
    "Inline minutes"); before the item was read, a guess its condition checks."""
    if rounds.spill not in (UNKNOWN, None, layout.NOT_SPILLED):
        return "spilled"
    if any(c.event.values for c in members) or rounds.inline_count + len(members) > layout.INLINE_MAX:
        return "spill"
    return "inline"


def _needs_listing(old: dict[str, Any], request: dict[str, Any], rounds: _Rounds) -> bool:
    """Whether the counter's listing must be written after this update of its day bucket: it created
    the item, made it live longer, or found records applied (that delivery may have died before)."""
    if not old or rounds.found:
        return True
    expires = attributes.integer(request["ExpressionAttributeValues"], ":exp")
    return attributes.integer(old, "expires_at", 0) < expires


def apply_item(
    dynamodb: DynamoDB, settings: Settings, touch: Touch, shard: str, members: list[Countable], now_ms: int
) -> Sent[Countable]:
    """Apply the records of one shard to one bucket item, exactly once (docs/counting.md, "The proof")."""
    members = sorted(members, key=lambda c: c.position)
    key = touch.key()
    day = touch.bucket.resolution == "day"
    item_id = attributes.key_of(key)
    spill = _spilled.get(dynamodb, (*item_id, shard), now_ms) if day else None
    rounds = _Rounds(spill=spill or UNKNOWN, slots=_slot_hints.get(dynamodb, item_id, now_ms))
    # A counter's own day bucket decides its listing (GET /counters, catalog.py).
    lists = day and touch.pk.startswith(keyspace.COUNTER)
    for _ in range(MAX_ROUNDS):
        if not members:
            return Sent(found=rounds.found, calls=rounds.calls, marks=rounds.marks(listed=lists))
        mode = _day_mode(rounds, members) if day else ""
        request = _bucket_update(settings, key, touch.bucket, shard, members, rounds, mode)
        try:
            rounds.calls += 1
            with translated("could not count a bucket"):
                response = dynamodb.update_item(**request)
        except ConditionFailed as failed:
            members = _not_held(dynamodb, settings, failed, key, shard, members, rounds, mode, now_ms)
            continue
        if mode == "inline":
            rounds.inline += members
        elif mode == "spill":
            spill = members[0].position if rounds.spill == layout.NOT_SPILLED else layout.FROM_START
            _spilled.put(dynamodb, (*item_id, shard), spill, now_ms)
        elif mode == "spilled":
            _spilled.put(dynamodb, (*item_id, shard), str(rounds.spill), now_ms)
        old = response.get("Attributes", {})
        if rounds.taken:
            _slot_hints.put(dynamodb, item_id, {**layout.slots_of(old), **rounds.taken}, now_ms)
        pruned = _prune(dynamodb, settings, key, old, shard, now_ms)
        return Sent(
            applied=members,
            found=rounds.found,
            calls=rounds.calls + (1 if pruned is not None else 0),
            marks=rounds.marks(listed=lists and _needs_listing(old, request, rounds), applied=members),
            details=Counter(positions_pruned=pruned) if pruned else Counter(),
        )
    raise StorageError("a bucket's position kept moving")


def _not_held(
    dynamodb: DynamoDB,
    settings: Settings,
    failed: ConditionFailed,
    key: dict[str, Any],
    shard: str,
    members: list[Countable],
    rounds: _Rounds,
    mode: str,
    now_ms: int,
) -> list[Countable]:
    """After a failed update: the records the item does not hold yet (its cancelled condition
    returned how far this shard got), noting the others in `rounds`."""
    stored = stored_item(dynamodb, settings, failed, key)
    stamp = stored.stamp(shard)
    applied = [c for c in members if c.position <= stamp.position]
    rounds.found += applied
    # Between the position stored before the last update and that update's first record: that
    # update skipped it, which only a shard read out of order does.
    rounds.beyond += [c for c in applied if stamp.before < c.position < stamp.first]
    spill = stored.spills.get(layout.spill_attribute(shard))
    rounds.inline += [c for c in applied if layout.held_inline(spill, c.position)]
    members = [c for c in members if c.position > stamp.position]
    rounds.before = stamp.position
    longer = stored.retention > max((c.event.retention_seconds for c in members), default=0)
    learnt = bool(mode) and (rounds.spill != spill or rounds.inline_count != stored.inline_count)
    rounds.spill, rounds.inline_count = spill, stored.inline_count
    named = rounds.slots != stored.slots
    rounds.slots = stored.slots
    _slot_hints.put(dynamodb, attributes.key_of(key), stored.slots, now_ms)
    if not applied and not learnt and not named and (rounds.keep_stored or not longer):
        raise StorageError("a bucket's condition failed for no reason this code knows") from failed
    rounds.keep_stored = rounds.keep_stored or longer
    return members


@dataclass
class BucketUpdate:
    """What a set of events adds to one bucket item."""

    n: int = 0
    minutes: Counter[int] = field(default_factory=Counter)
    retention: int = 0
    sums: dict[str, Decimal] = field(default_factory=dict)  # attribute name -> amount to ADD
    # The item's value names by slot as known (None: not read: taken as none, which the update's
    # condition checks), the slot of each name this update sums, and the values it leaves unsummed.
    stored: dict[int, str] | None = None
    slots: dict[str, int] = field(default_factory=dict)
    unsummed: int = 0

    inline: Counter[int] = field(default_factory=Counter)  # day items: minute of day -> count

    def add(self, bucket: Bucket, event: Event, inline: bool = False) -> None:
        self.n += 1
        minute = timebuckets.minute_of_hour(event.time_ms)
        hour = bucket.resolution == "hour"
        if hour:
            self.minutes[minute] += 1
        elif inline:
            self.inline[timebuckets.minute_of(event.time_ms) % timebuckets.DAY_MINUTES] += 1
        self.retention = max(self.retention, event.retention_seconds)
        for name, amount in event.values.items():
            slot = self._slot(name)
            if slot is None:
                self.unsummed += 1
                continue
            attribute = layout.slot_minute_attribute(minute, slot) if hour else layout.slot_total_attribute(slot)
            self.sums[attribute] = decimals.EXACT.add(self.sums.get(attribute, Decimal(0)), amount)

    def _slot(self, name: str) -> int | None:
        """The slot that sums this value name in the item: its own, else the first free one, else None."""
        if name not in self.slots:
            known = self.stored or {}
            own = [slot for slot, held in sorted(known.items()) if held == name]
            free = [s for s in range(layout.MAX_SUM_NAMES) if s not in known and s not in self.slots.values()]
            if own or free:
                self.slots[name] = (own + free)[0]
        return self.slots.get(name)


def _bucket_update(
    settings: Settings,
    key: dict[str, Any],
    bucket: Bucket,
    shard: str,
    members: list[Countable],
    rounds: _Rounds,
    mode: str = "",
) -> dict[str, Any]:
    update = BucketUpdate(stored=rounds.slots)
    for c in members:
        # Inline only a minute its hour still counts (an hour past the event's retention does not).
        update.add(bucket, c.event, inline=mode == "inline" and any(b.resolution == "hour" for b in c.buckets))
    rounds.taken = {slot: name for name, slot in update.slots.items()}
    request = increment(settings, key, bucket, update, rounds.keep_stored)
    names, values = request["ExpressionAttributeNames"], request["ExpressionAttributeValues"]
    names["#p"] = shard
    values[":first"] = {"S": members[0].position}
    values[":pos"] = {"S": members[-1].stamp(members[0].position, rounds.before)}
    request["UpdateExpression"] += ", #p = :pos"
    conditions = ["(attribute_not_exists(#p) OR #p < :first)"]
    if request.get("ConditionExpression"):
        conditions.append(request["ConditionExpression"])
    if mode:  # a day item: where this shard's events go
        names["#x"] = layout.spill_attribute(shard)
    if mode == "inline" or (mode == "spill" and rounds.spill == layout.NOT_SPILLED):
        values[":inf"] = {"S": layout.NOT_SPILLED}
    if mode == "inline":
        # Inline while this shard is (or starts) inline and the item has room.
        names["#ic"] = layout.INLINE_COUNT
        values[":room"] = {"N": str(layout.INLINE_MAX - update.n)}
        values[":k"] = {"N": str(update.n)}
        request["UpdateExpression"] = request["UpdateExpression"].replace("ADD ", "ADD #ic :k, ", 1) + ", #x = :inf"
        conditions += ["(attribute_not_exists(#x) OR #x = :inf)", "(attribute_not_exists(#ic) OR #ic <= :room)"]
    elif mode == "spill" and rounds.spill == layout.NOT_SPILLED:
        request["UpdateExpression"] += ", #x = :first"  # inline before this update, hours from it on
        conditions.append("#x = :inf")
    elif mode == "spilled":
        # Known (or remembered) past NOT_SPILLED; checked, for a remembered value is a hint.
        conditions.append("(attribute_not_exists(#x) OR #x < :first)")
    elif mode == "spill":
        values[":start"] = {"S": layout.FROM_START}
        request["UpdateExpression"] += ", #x = :start"
        conditions.append("attribute_not_exists(#x)")
    request["ConditionExpression"] = " AND ".join(conditions)
    # The old item comes back at no read cost: written, its positions to prune; cancelled, how far it got.
    return request | {"ReturnValues": "ALL_OLD", "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}


def increment(
    settings: Settings, key: dict[str, Any], bucket: Bucket, update: BucketUpdate, keep_stored: bool
) -> dict[str, Any]:
    """An UpdateItem adding `update` to a bucket item, keeping the longer retention (docs/counting.md, "Retention")."""
    names = {"#r": "retention"}
    values = {
        ":exp": {"N": str(timebuckets.expires_at_s(bucket, update.retention))},
        ":r": {"N": str(update.retention)},
    }
    added = [
        ("n", "n", update.n),
        *((f"m{m}", layout.minute_attribute(m), k) for m, k in sorted(update.minutes.items())),
        *((f"i{m}", layout.inline_attribute(m), k) for m, k in sorted(update.inline.items())),
        *((f"v{i}", attribute, amount) for i, (attribute, amount) in enumerate(sorted(update.sums.items()))),
        *([("vx", layout.NOT_SUMMED, update.unsummed)] if update.unsummed else []),
    ]
    names |= {f"#{tag}": attribute for tag, attribute, _ in added}
    values |= {f":{tag}": {"N": str(amount)} for tag, _, amount in added}
    adds = [f"#{tag} :{tag}" for tag, _, _ in added]
    sets: list[str] = []
    conditions = [] if keep_stored else ["(attribute_not_exists(#r) OR #r <= :r)"]
    # The value names in their slots, on condition of the slots (docs/counting.md, "Item sizes").
    for name, slot in sorted(update.slots.items(), key=lambda kv: kv[1]):
        names[f"#w{slot}"] = layout.slot_name_attribute(slot)
        values[f":w{slot}"] = {"S": name}
        if (update.stored or {}).get(slot) == name:
            conditions.append(f"#w{slot} = :w{slot}")
        else:
            sets.append(f", #w{slot} = :w{slot}")
            conditions.append(f"attribute_not_exists(#w{slot})")
    kept = "if_not_exists(expires_at, :exp), #r = if_not_exists(#r, :r)" if keep_stored else ":exp, #r = :r"
    return {
        "TableName": settings.counts_table,
        "Key": key,
        "UpdateExpression": f"ADD {', '.join(adds)} SET expires_at = {kept}" + "".join(sets),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        **({"ConditionExpression": " AND ".join(conditions)} if conditions else {}),
    }


def stored_slots(dynamodb: DynamoDB, settings: Settings, key: dict[str, Any]) -> dict[int, str]:
    """The value names a bucket item sums by slot, read consistently (for an update sent in a
    transaction, whose cancelled condition returns no item to learn them from)."""
    names = {f"#w{s}": layout.slot_name_attribute(s) for s in range(layout.MAX_SUM_NAMES)}
    item = dynamo.get_item(dynamodb, settings.counts_table, key, "could not read a bucket's value names", names=names)
    return layout.slots_of(item or {})


@dataclass(frozen=True)
class StoredPositions:
    """A bucket or audit item as read back for its proof."""

    positions: dict[str, str]  # each shard's stamped position, by its `s:<hash>` attribute
    retention: int
    spills: dict[str, str] = field(default_factory=dict)  # day items: `x:<hash>` -> where its events went
    inline_count: int = 0
    slots: dict[int, str] = field(default_factory=dict)  # the value names it sums, by slot

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> StoredPositions:
        texts = {name: str(value["S"]) for name, value in item.items() if isinstance(value, dict) and "S" in value}
        return cls(
            {name: text for name, text in texts.items() if layout.is_shard_attribute(name)},
            attributes.integer(item, "retention", 0),
            {name: text for name, text in texts.items() if name.startswith(layout.SPILL_PREFIX)},
            attributes.integer(item, layout.INLINE_COUNT, 0),
            layout.slots_of(item),
        )

    def stamp(self, shard: str) -> layout.Stamp:
        return layout.split_stamped(self.positions.get(shard, ""))


def stored_item(
    dynamodb: DynamoDB, settings: Settings, failed: ConditionFailed, key: dict[str, Any]
) -> StoredPositions:
    """The positions on the item a cancelled condition found (returned with the failure:
    ReturnValuesOnConditionCheckFailure=ALL_OLD, which moto 5.2.5 supports for UpdateItem too)."""
    found = condition_item(dynamodb, settings.counts_table, key, failed, "could not read an item's positions")
    return StoredPositions.from_item(found or {})


def _prune(
    dynamodb: DynamoDB, settings: Settings, key: dict[str, Any], old: dict[str, Any], own: str, now_ms: int
) -> int | None:
    """Remove the positions of shards no delivery can bring back below (docs/counting.md,
    "The proof"); how many, None when there was nothing to remove (no call made)."""
    horizon = now_ms // 1000 - settings.marker_ttl_seconds
    stale = {
        name: value
        for name, value in StoredPositions.from_item(old).positions.items()
        if name != own and (created := layout.split_stamped(value).created_s) is not None and created < horizon
    }
    if not stale:
        return None
    names = {f"#s{i}": name for i, name in enumerate(sorted(stale))}
    values = {f":s{i}": {"S": stale[name]} for i, name in enumerate(sorted(stale))}
    # A day item's `x:` of the shard goes with its position: no delivery can ask about it again.
    spills = {f"#x{i}": x for i, name in enumerate(sorted(stale)) if (x := layout.spill_attribute(name)) in old}
    with suppress(ConditionFailed), translated("could not prune positions"):
        dynamodb.update_item(
            TableName=settings.counts_table,
            Key=key,
            UpdateExpression="REMOVE " + ", ".join([*names, *spills]),
            ConditionExpression=" AND ".join(f"{n} = :{n[1:]}" for n in names),
            ExpressionAttributeNames={**names, **spills},
            ExpressionAttributeValues=values,
        )
        return len(stale)
    return 0  # moved on meanwhile: the next write prunes it
