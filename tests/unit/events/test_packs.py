"""The events-table item format (events/packs.py) and the positions of a pack's events. Pure."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core.item_sizes import item_size
from chalicelib.core.settings import Settings
from chalicelib.counters import layout
from chalicelib.events import ingest, packs

NOW = 1_795_000_000_000
SETTINGS = Settings()
_serialize = TypeSerializer().serialize
_deserialize = TypeDeserializer().deserialize


def stored(item: dict[str, Any]) -> dict[str, Any]:
    """An item as DynamoDB gives it back (numbers as Decimals)."""
    return {k: _deserialize(_serialize(v)) for k, v in item.items()}


def dynamo(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _serialize(v) for k, v in item.items()}


events_strategy = st.lists(
    st.builds(
        ingest.Event,
        counter=st.from_regex(r"[A-Za-z0-9_.:-]{1,20}", fullmatch=True),
        id=st.from_regex(r"[a-z0-9]{1,12}", fullmatch=True),
        time_ms=st.integers(NOW - 40 * 86_400_000, NOW + 300_000),
        retention_seconds=st.integers(60, 10 * 365 * 86400),
        attributes=st.dictionaries(
            st.sampled_from(["a", "region", "n"]), st.integers(-1000, 1000) | st.text(max_size=5)
        ),
        id_given=st.booleans(),
        dimensions=st.dictionaries(st.sampled_from(["provider", "region"]), st.sampled_from(["p1", "eu:west"])),
        values=st.dictionaries(st.sampled_from(["amount", "qty"]), st.decimals(-1000, 1000, places=2)),
    ),
    min_size=1,
    max_size=25,
)


@given(events_strategy)
def test_given_any_request_when_packed_and_unpacked_then_each_event_reads_back_as_its_one_event_item(
    events: list[ingest.Event],
) -> None:
    items = ingest.to_items(events, NOW, SETTINGS)
    assert [e for _, held in items for e in held] == events
    for item, held in items:
        back = list(packs.events_in(stored(item)))
        assert [ingest.from_item(e) for e in back] == [replace(h, attributes={}) for h in held]
        assert [e["attributes"] for e in back] == [stored({"a": h.attributes})["a"] for h in held]
        assert packs.count(stored(item)) == len(held)
        assert all(e["pk"] == item["pk"] and e["sk"] == item["sk"] for e in back)


def test_given_one_event_then_stored_in_the_one_event_layout_as_before() -> None:
    event = ingest.Event("jobs", "e1", NOW, 3600, {"a": 1})
    ((item, held),) = ingest.to_items([event], NOW, SETTINGS)
    assert held == [event]
    assert item["kind"] == "event" and set(item) == set(ingest.to_item(event, NOW, SETTINGS))


def test_given_25_events_of_150_bytes_then_one_item_of_at_most_4_write_units() -> None:
    events = [
        ingest.Event(
            f"jobs.provider-{i:02d}",
            f"{i:032x}",
            NOW,
            SETTINGS.default_retention_seconds,
            {"region": "eu-west-1", "sku": "SKU-123456", "customer": "customer-12345", "amount": Decimal("123.45")},
            id_given=False,
        )
        for i in range(25)
    ]
    ((item, _),) = ingest.to_items(events, NOW, SETTINGS)
    size = item_size(dynamo(item))
    assert size <= 4 * 1024, size
    assert sum(item_size(dynamo(ingest.to_item(e, NOW, SETTINGS))) > 0 for e in events) == 25  # was 25 items


def test_given_events_too_big_for_one_item_then_the_fewest_packs_each_under_the_limit_in_order() -> None:
    big = {"text": "x" * 16_000}
    events = [ingest.Event("jobs", f"e{i}", NOW, 3600, big) for i in range(25)]
    items = ingest.to_items(events, NOW, SETTINGS)
    assert len(items) == 2
    assert [e.id for _, held in items for e in held] == [e.id for e in events]
    assert all(item_size(dynamo(item)) <= packs.PACK_MAX_BYTES for item, _ in items)
    assert items[0][0]["sk"] != items[1][0]["sk"]


def test_given_a_pack_with_mixed_expiries_then_it_lives_as_long_as_its_longest_and_readers_skip_the_expired() -> None:
    short, long_ = (
        ingest.to_item(ingest.Event("a", "1", NOW, 60), NOW, SETTINGS),
        ingest.to_item(ingest.Event("b", "2", NOW, 60), NOW, SETTINGS),
    )
    short["expires_at"] = NOW // 1000 + 100
    long_["expires_at"] = NOW // 1000 + 1000
    item = stored(packs.pack([short, {**long_, "pk": short["pk"], "sk": short["sk"]}]))
    assert item["expires_at"] == NOW // 1000 + 1000
    assert [e["counter"] for e in packs.events_in(item, NOW // 1000 + 50)] == ["a", "b"]
    assert [e["counter"] for e in packs.events_in(item, NOW // 1000 + 500)] == ["b"]
    assert [e["counter"] for e in packs.events_in(item)] == ["a", "b"]  # the audit and counting see both


def test_given_unreadable_packs_then_format_errors_and_bad_entries_come_back_empty() -> None:
    base = {"pk": "p", "sk": "s", "kind": "pack", "ingested_at": Decimal(NOW), "n": Decimal(2)}
    for broken in ({**base, "e": "no list"}, {**base, "e": [], "o": Decimal(-1)}, {"pk": "p", "kind": "pack", "e": []}):
        try:
            packs.unpack(broken)
        except packs.PackFormatError:
            continue
        raise AssertionError(broken)
    ((index, event),) = packs.unpack({**base, "e": ["not a map"]})
    assert index == 0 and "counter" not in event


@given(
    st.lists(st.tuples(st.integers(10**20, 10**22), st.one_of(st.none(), st.integers(0, 24))), min_size=2, max_size=30)
)
def test_given_positions_of_records_and_pack_events_then_they_sort_like_sequence_then_index(
    events: list[tuple[int, int | None]],
) -> None:
    # One record is either a pack or one event: an index or none per sequence number.
    kinds: dict[int, bool] = {}
    events = [(s, i) for s, i in events if kinds.setdefault(s, i is not None) == (i is not None)]
    positions = {e: layout.event_position(str(e[0]), e[1]) for e in events}
    by_position = sorted(set(events), key=lambda e: str(positions[e]))
    assert by_position == sorted(set(events), key=lambda e: (e[0], -1 if e[1] is None else e[1]))
    # A record's stored position stamped (what an item keeps) still sorts below its later events.
    for s, i in events:
        if i is not None and i < 24:
            stamped = layout.stamped_position(str(positions[(s, i)]), 1)
            assert stamped < str(layout.event_position(str(s), i + 1))
            assert stamped >= str(layout.event_position(str(s), i))


def test_given_an_item_of_the_one_event_layout_then_its_position_is_the_record_position_as_before() -> None:
    assert layout.event_position("123456789012345678901", None) == layout.sequence_position("123456789012345678901")
    assert layout.event_position("123456789012345678901", 7) == "21123456789012345678901007"
    assert layout.event_position("123456789012345678901", 1000) is None
