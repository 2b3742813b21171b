"""Filter counters: which counters an event is counted in, and which one a `where` reads.
Pure. Their keys, and why single dimensions and pairs are exact: docs/counting.md, "Filters
(`where`)"."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from itertools import combinations

from chalicelib.core import keyspace
from chalicelib.core.errors import ValidationError
from chalicelib.counters.layout import counter_pk
from chalicelib.events import dimensions as event_dimensions

# Filter counters are kept for single dimensions and pairs: a `where` holds at most this many clauses.
MAX_WHERE = 2
EVERY_PAIR = ("*",)


def subset_id(subset: Mapping[str, str]) -> str:
    """A subset of dimensions as 32 hex characters: the same for the same pairs in any order."""
    text = json.dumps(sorted(subset.items()), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def filter_pk(counter: str, subset: Mapping[str, str]) -> str:
    return f"{keyspace.FILTER}{counter}#{subset_id(subset)}"


def pair_counted(names: Iterable[str], pairs: tuple[str, ...]) -> bool:
    """Whether two dimension names have a filter counter under the FILTER_PAIRS setting."""
    if pairs == EVERY_PAIR:
        return True
    a, b = sorted(names)
    return f"{a}+{b}" in pairs or f"{b}+{a}" in pairs


def subsets(dimensions: Mapping[str, str], pairs: tuple[str, ...] = EVERY_PAIR) -> Iterator[dict[str, str]]:
    """The subsets of an event's dimensions that have a filter counter: each alone, each pair counted."""
    chosen = sorted(dimensions.items())
    yield from (dict([one]) for one in chosen)
    yield from (dict(two) for two in combinations(chosen, 2) if pair_counted(dict(two), pairs))


def count_pks(counter: str, dimensions: Mapping[str, str], pairs: tuple[str, ...] = EVERY_PAIR) -> list[str]:
    """The partition keys of every counter an event is counted in: its own, then its filters."""
    return [counter_pk(counter)] + [filter_pk(counter, s) for s in subsets(dimensions, pairs)]


def check_filter(names: Iterable[str], pairs: tuple[str, ...]) -> None:
    """ValidationError unless the dimensions named have a filter counter (none, one, or a pair counted)."""
    names = sorted(set(names))
    if len(names) > MAX_WHERE:
        raise ValidationError(
            f"at most {MAX_WHERE} dimensions can be filtered on together: filters are counted for single "
            "dimensions and pairs"
        )
    if len(names) == 2 and not pair_counted(names, pairs):
        raise ValidationError(
            f"{names[0]} and {names[1]} together have no filter counter: the FILTER_PAIRS setting "
            "names the pairs counted"
        )


def read_pk(counter: str, where: Mapping[str, str]) -> str:
    """The counter a (possibly filtered) count is read from."""
    return filter_pk(counter, where) if where else counter_pk(counter)


def parse_where(raw: list[str] | None) -> dict[str, str]:
    """`where=name:value` clauses (the value may hold colons) as {name: value}; all must hold."""
    if len(raw or []) > MAX_WHERE:
        raise ValidationError(
            f"where holds at most {MAX_WHERE} clauses: filters are counted for single dimensions and pairs"
        )
    where: dict[str, str] = {}
    for clause in raw or []:
        name, colon, value = clause.partition(":")
        if not colon:
            raise ValidationError(f"where must be name:value, got {clause[:80]!r}")
        event_dimensions.dimensions({name: value}, "where")
        if name in where and where[name] != value:
            raise ValidationError(f"where names {name} twice with different values: no event can match")
        where[name] = value
    return where
