"""Packed catalog entries and the fold's page layout. Pure; brute force where it exists."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core import catalog_pages
from chalicelib.core.catalog_pages import Listed

NAMES = st.text(alphabet="abcz09.:-_", min_size=1, max_size=12)
ENTRIES = st.lists(
    st.builds(Listed, NAMES, st.integers(0, 10**13), st.none() | st.integers(0, 10**10)),
    max_size=60,
)


@given(ENTRIES)
def test_given_entries_when_packed_then_unpacked_in_name_order_unchanged(entries: list[Listed]) -> None:
    merged = catalog_pages.union(entries)
    assert catalog_pages.unpack(catalog_pages.pack(merged.values())) == sorted(merged.values(), key=lambda e: e.name)


def test_given_bytes_not_packed_then_value_error() -> None:
    with pytest.raises(ValueError):
        catalog_pages.unpack(b"not zlib")


@given(ENTRIES, ENTRIES)
def test_given_a_name_written_twice_then_one_entry_with_the_later_time_and_the_longer_life(
    first: list[Listed], second: list[Listed]
) -> None:
    merged = catalog_pages.union(first, second)
    assert set(merged) == {e.name for e in first + second}
    for name, entry in merged.items():
        seen = [e for e in first + second if e.name == name]
        assert entry.last_seen_ms == max(e.last_seen_ms for e in seen)
        lives = [e.expires_s for e in seen]
        assert entry.expires_s == (None if None in lives else max(x for x in lives if x is not None))
    assert catalog_pages.union(first, second) == catalog_pages.union(second, first, first)  # redelivery


@given(ENTRIES, st.integers(1, 200))
def test_given_entries_when_cut_into_runs_then_in_order_each_within_the_bound_unless_one_entry(
    entries: list[Listed], most: int
) -> None:
    ordered = sorted(catalog_pages.union(entries).values(), key=lambda e: e.name)
    runs = catalog_pages.chunks(ordered, most)
    assert [e for run in runs for e in run] == ordered
    for run in runs:
        assert run and (len(run) == 1 or sum(len(e.line()) + 1 for e in run) <= most)


@given(
    st.lists(NAMES, unique=True, max_size=5),
    ENTRIES,
    ENTRIES,
    st.integers(40, 400),
)
def test_given_stored_pages_and_new_entries_when_laid_out_then_pages_tile_every_name_once(
    extra_lows: list[str], stored_entries: list[Listed], new: list[Listed], most: int
) -> None:
    # Stored pages as a fold would have left them: each holding the names of its range.
    lows = sorted({"", *extra_lows})
    old = catalog_pages.union(stored_entries)
    placed = catalog_pages.assign(lows, old)
    stored = {low: [old[n] for n in placed[low]] for low in lows}
    everything = catalog_pages.union(stored_entries, new)

    plan = catalog_pages.layout(stored, everything, most)

    after = {low: entries for low, entries in stored.items() if low not in plan.delete}
    after.update(plan.write)
    pages = sorted(after.items())
    assert pages[0][0] == ""  # the first page's range starts below every name
    names = [e.name for _, entries in pages for e in entries]
    assert names == sorted(everything)  # every name once, in page order
    for index, (low, entries) in enumerate(pages):
        high = pages[index + 1][0] if index + 1 < len(pages) else None
        assert all(low <= e.name and (high is None or e.name < high) for e in entries)
        assert [everything[e.name] for e in entries] == entries
    for low in plan.write:  # only pages that changed are written
        assert low not in stored or plan.write[low] != stored[low]


def test_given_a_page_grown_past_its_bound_then_split_and_an_emptied_page_deleted() -> None:
    entries = {f"n{i:03d}": Listed(f"n{i:03d}", 1, None) for i in range(10)}  # 8 bytes a line
    stored = {"": list(entries.values())[:2], "x": [Listed("x1", 1, 5)]}
    plan = catalog_pages.layout(stored, entries, 30)  # "x1" expired: not in `entries`
    assert plan.delete == ["x"]
    assert sorted(plan.write) == ["", "n003", "n006", "n009"]
    assert [e.name for e in plan.write[""]] == ["n000", "n001", "n002"]
    unchanged = {"": plan.write[""], "n003": plan.write["n003"]}
    assert catalog_pages.layout(unchanged, {e.name: e for run in unchanged.values() for e in run}, 30).write == {}
