"""What one event costs to write, in DynamoDB write units: the figures the shard sizing rule
uses (docs/deploy.md, Sizing the events table). Priced by bench.metering (DynamoDB's rules)."""

from __future__ import annotations

import json
from typing import Any

from boto3.dynamodb.types import TypeSerializer
from hypothesis import given
from hypothesis import strategies as st

from bench.metering import attribute_size, item_size, write_units
from chalicelib.core.settings import Settings
from chalicelib.events import ingest as events

NOW = 1_795_000_000_000
SETTINGS = Settings()
LONGEST = {"counter": "c" * 200, "id": "i" * events.ID_MAX_CHARS}
# The figures docs/deploy.md and the EVENT_WRITE_SHARDS comment give.
BARE, TEXT_16_KB, AT_MOST = 1, 17, 33


def stored(body: dict[str, Any]) -> dict[str, Any]:
    (event,) = events.parse_body(body, NOW, SETTINGS)  # accepted by POST /events
    return {name: TypeSerializer().serialize(value) for name, value in events.to_item(event, NOW, SETTINGS).items()}


def json_bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def test_given_an_event_without_attributes_then_one_write_unit() -> None:
    assert write_units(item_size(stored({"counter": "a"}))) == BARE
    assert write_units(item_size(stored(LONGEST))) == BARE


def test_given_16_kb_of_text_attributes_then_17_write_units() -> None:
    text = "x" * (events.MAX_ATTRIBUTES_BYTES - json_bytes({"t": ""}))

    assert write_units(item_size(stored({**LONGEST, "attributes": {"t": text}}))) == TEXT_16_KB


json_trees = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**12), 10**12) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(min_size=1, max_size=8), children, max_size=6)
    ),
    max_leaves=40,
)


@given(json_trees)
def test_given_any_json_value_then_dynamodb_stores_it_in_at_most_twice_its_json_bytes_plus_three(value: Any) -> None:
    """Empty lists and maps cost DynamoDB 3 bytes (+1 inside another) against JSON's 2 (+1 for
    the comma): nesting is the worst case, and it stays under twice the JSON."""
    assert attribute_size(TypeSerializer().serialize(value)) <= 2 * json_bytes(value) + 3


def test_given_the_largest_event_accepted_then_at_most_33_write_units_and_nested_lists_come_close() -> None:
    fixed = item_size(stored(LONGEST)) - attribute_size({"M": {}})
    bound = write_units(fixed + 2 * events.MAX_ATTRIBUTES_BYTES + 3)
    nested: list[Any] = []
    for _ in range(29):
        nested = [nested]
    count = (events.MAX_ATTRIBUTES_BYTES - json_bytes({"t": []})) // (json_bytes(nested) + 1)
    worst_found = write_units(item_size(stored({**LONGEST, "attributes": {"t": [nested] * count}})))

    assert bound == AT_MOST
    assert 30 <= worst_found <= AT_MOST
