"""Filter counters, sums attributes and `where` parsing (counters/layout.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core.errors import ValidationError
from chalicelib.counters import breakdowns, filters, layout

DIMS = st.dictionaries(
    st.from_regex(r"[a-z]{1,5}", fullmatch=True), st.text(min_size=1, max_size=10), min_size=0, max_size=4
)


@given(DIMS)
def test_given_dimensions_when_subsets_taken_then_every_single_and_pair_once(dims: dict[str, str]) -> None:
    found = list(filters.subsets(dims))
    k = len(dims)
    assert len(found) == k + k * (k - 1) // 2
    assert len({filters.subset_id(s) for s in found}) == len(found)
    assert all(set(s.items()) <= set(dims.items()) and 1 <= len(s) <= 2 for s in found)
    # An event is counted in exactly the filter counters a where over its own values reads.
    pks = filters.count_pks("c", dims)
    for s in found:
        assert filters.read_pk("c", s) in pks
    assert filters.read_pk("c", {}) == pks[0] == "CTR#c"


def test_given_the_same_pairs_in_another_order_when_keyed_then_same_filter() -> None:
    a = filters.filter_pk("jobs", {"provider": "p2", "region": "eu"})
    b = filters.filter_pk("jobs", {"region": "eu", "provider": "p2"})
    assert a == b != filters.filter_pk("jobs", {"provider": "p2"})
    assert filters.filter_pk("jobs", {"a": "b#c"}) != filters.filter_pk("jobs", {"a#b": "c"})


def test_given_where_clauses_when_parsed_then_value_keeps_its_colons() -> None:
    assert filters.parse_where(["url:https://x.example:8080/a", "region:eu"]) == {
        "url": "https://x.example:8080/a",
        "region": "eu",
    }
    assert filters.parse_where(["a:b", "a:b"]) == {"a": "b"}
    assert filters.parse_where(None) == {}


@pytest.mark.parametrize(
    "bad",
    [
        ["provider"],
        [":p2"],
        ["provider:"],
        ["a b:c"],
        ["p:" + "x" * 129],
        ["a:1", "a:2"],
        [f"d{i}:v" for i in range(3)],
    ],
)
def test_given_bad_where_when_parsed_then_400(bad: list[str]) -> None:
    with pytest.raises(ValidationError):
        filters.parse_where(bad)


def test_given_hour_item_with_minute_sums_when_read_then_the_minutes_asked() -> None:
    item = {
        layout.slot_name_attribute(0): {"S": "amount"},
        layout.slot_minute_attribute(3, 0): {"N": "1.5"},
        layout.slot_minute_attribute(40, 0): {"N": "2"},
    }
    assert layout.sums_of(item, None, "hour") == {"amount": 3.5}
    assert layout.sums_of(item, (0, 10), "hour") == {"amount": 1.5}
    assert layout.sums_of(item, (5, 10), "hour") == {}
    day = {
        layout.slot_name_attribute(0): {"S": "amount"},
        layout.slot_total_attribute(0): {"N": "7"},
    }
    assert layout.sums_of(day, None, "day") == {"amount": 7}


@given(st.integers(0, 10_000_000), st.integers(0, 400 * 1440))
def test_given_any_window_up_to_400_days_when_planned_then_summary_keys_bounded(first: int, length: int) -> None:
    groups = breakdowns.summary_keys("c", "d", first, first + length)
    # days + hours of two partial days + two partial hours, each its hour's part 0 and quarter hours
    assert len(groups) <= 401 + 2 * 23 + 2 * (1 + 4)
    assert sum(len(keys) for keys, _ in groups) <= (401 + 46) * layout.SUMMARY_PARTS + 2 * (1 + 4)
    covered: set[int] = set()
    partial_hours: set[int] = set()
    for keys, span in groups:
        sk = keys[0]["sk"]["S"]
        kind, index = sk[0], int(sk.split("#")[1])
        size = {"d": 1440, "h": 60, "q": 15}[kind]
        lo, hi = span if span is not None else (0, size - 1)
        minutes = set(range(index * size + lo, index * size + hi + 1))
        if kind == "h" and span is not None:
            partial_hours |= minutes  # a partial hour: its part 0 (kept whole) or its quarter hours
            continue
        assert not minutes & covered
        covered |= minutes
    assert covered == set(range(first, first + length + 1))
    assert partial_hours <= covered


def test_given_declared_pairs_when_subsets_taken_then_singles_and_only_those_pairs() -> None:
    dims = {"provider": "p2", "region": "eu", "tier": "a"}
    declared = ("region+provider",)
    found = list(filters.subsets(dims, declared))
    assert found == [{"provider": "p2"}, {"region": "eu"}, {"tier": "a"}, {"provider": "p2", "region": "eu"}]
    assert len(list(filters.subsets(dims, ("none",)))) == 3
    filters.check_filter(["provider", "region"], declared)
    filters.check_filter(["tier"], ("none",))
    for names, pairs in ((["provider", "tier"], declared), (["provider", "region"], ("none",))):
        with pytest.raises(ValidationError, match="FILTER_PAIRS"):
            filters.check_filter(names, pairs)
    with pytest.raises(ValidationError, match="pairs"):
        filters.check_filter(["provider", "region", "tier"], filters.EVERY_PAIR)


@pytest.mark.parametrize("raw", ["a", "a+a", "a+b+c", "a+b,*", "a b+c"])
def test_given_bad_filter_pairs_setting_when_read_then_refused(raw: str) -> None:
    from chalicelib.core.settings import Settings, SettingsError

    with pytest.raises(SettingsError, match="FILTER_PAIRS"):
        Settings.from_env({"FILTER_PAIRS": raw})
    assert Settings.from_env({"FILTER_PAIRS": "b+a, c+d"}).filter_pairs == ("b+a", "c+d")
    assert Settings.from_env({}).filter_pairs == ("*",)
