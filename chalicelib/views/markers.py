"""Where a view's marker lives, and the requests that count views and move markers. Pure. Why a
count and its marker happen together and a spill hides no token: docs/design.md, "Exactly once";
docs/guarantees.md, "A view and its marker: one conditional UpdateItem of its counter"."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Collection, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from chalicelib.core import attributes, item_sizes, times
from chalicelib.views import layout as view_layout

TOKEN_BYTES = 16
INLINE_PREFIX = "k"  # k<day since the epoch>: tokens of that day's markers (binary set)
SPILLS = "ks"  # on the counter: how many times its inline markers were spilled
SPILLED_PREFIX = "K#"
# A write is charged per started kilobyte of the larger of the item before and after it.
WRITE_UNIT_BYTES = 1024


@dataclass(frozen=True)
class Marked:
    """One view to count on its URL's counter: its token, its marker's day and its pending minute
    (None when its hour bucket is past retention: it counts in all time only)."""

    token: bytes
    day: int
    minute: int | None


def token(marker_sk: str) -> bytes:
    return hashlib.sha256(marker_sk.encode("utf-8")).digest()[:TOKEN_BYTES]


def marker_day(time_ms: int) -> int:
    """The UTC day of a view's time (a client-day marker's day is its view's day)."""
    return time_ms // times.DAY_MS


def inline_attribute(day: int) -> str:
    return f"{INLINE_PREFIX}{day}"


def inline(counter: dict[str, Any] | None) -> dict[int, set[bytes]]:
    """A counter's inline tokens, by marker day."""
    return {
        int(name[len(INLINE_PREFIX) :]): {bytes(member) for member in value["BS"]}
        for name, value in (counter or {}).items()
        if name.startswith(INLINE_PREFIX) and name[len(INLINE_PREFIX) :].isdigit() and "BS" in value
    }


def holds(days: Mapping[int, set[bytes]], marked: Marked) -> bool:
    """Whether `days` (a counter's `inline`) hold the view's token."""
    return marked.token in days.get(marked.day, set())


def spills(counter: dict[str, Any] | None) -> int | None:
    """How many times the counter's markers were spilled; None when never (or no counter)."""
    return attributes.optional_integer(counter, SPILLS) if counter else None


def day_expires_at_s(day: int, horizon_s: int) -> int:
    """When every marker of `day` is dead: its end plus the horizon (layout.marker_expires_at_s)."""
    return (day + 1) * times.DAY_MS // 1000 + horizon_s


def live_day(day: int, horizon_s: int, now_ms: int) -> bool:
    return day_expires_at_s(day, horizon_s) > now_ms // 1000


def spilled_sk(value: bytes) -> str:
    return SPILLED_PREFIX + value.hex()


def _guard(counter: dict[str, Any] | None, names: dict[str, str], values: dict[str, Any]) -> str:
    """The condition that no spill happened since `counter` was read."""
    names["#ks"] = SPILLS
    seen = spills(counter)
    if seen is None:
        return "attribute_not_exists(#ks)"
    values[":ks"] = {"N": str(seen)}
    return "#ks = :ks"


def _day_sets(days: Mapping[int, Collection[bytes]], names: dict[str, str], values: dict[str, Any]) -> list[str]:
    """`#k<d> :k<d>` for each day's set of tokens, in day order."""
    for d, (day, tokens) in enumerate(sorted(days.items())):
        names[f"#k{d}"] = inline_attribute(day)
        values[f":k{d}"] = {"BS": sorted(tokens)}
    return [f"#k{d} :k{d}" for d in range(len(days))]


def _counter_update(
    table: str,
    url_pk: str,
    counter: dict[str, Any] | None,
    expression: str,
    condition: str,
    names: dict[str, str],
    values: dict[str, Any],
    horizon_s: int,
    now_ms: int,
    kept_days: Container[int] = (),
) -> dict[str, Any]:
    """An UpdateItem of the counter that also removes the sets of dead days (but `kept_days`)."""
    dead = sorted(day for day in inline(counter) if day not in kept_days and not live_day(day, horizon_s, now_ms))
    names.update({f"#x{i}": inline_attribute(day) for i, day in enumerate(dead)})
    if dead:
        expression += " REMOVE " + ", ".join(f"#x{i}" for i in range(len(dead)))
    return {
        "TableName": table,
        "Key": view_layout.counter_key_of(url_pk),
        "UpdateExpression": expression,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def count_request(
    table: str,
    url_pk: str,
    url: str,
    counter: dict[str, Any] | None,
    views: Sequence[Marked],
    now_ms: int,
    horizon_s: int,
    *,
    last_counted: str,
    listed: str,
) -> dict[str, Any]:
    """The UpdateItem counting `views` (none held by `counter` as read) on their URL's counter
    (docs/design.md, "Exactly once")."""
    names: dict[str, str] = {"#v": "views", "#u": "url", "#l": last_counted, "#c": listed}
    values: dict[str, Any] = {
        ":k": {"N": str(len(views))},
        ":u": {"S": url},
        ":now": {"N": str(now_ms)},
        ":yes": {"BOOL": True},
    }
    adds = ["#v :k"]
    minutes = Counter(v.minute for v in views if v.minute is not None)
    for i, (minute, k) in enumerate(sorted(minutes.items())):
        names[f"#p{i}"] = view_layout.pending_attribute(minute)
        values[f":p{i}"] = {"N": str(k)}
        adds.append(f"#p{i} :p{i}")
    by_day: dict[int, list[bytes]] = defaultdict(list)
    for v in views:
        by_day[v.day].append(v.token)
    conditions = [_guard(counter, names, values)]
    adds += _day_sets(by_day, names, values)
    tokens = [(d, value) for d, day in enumerate(sorted(by_day)) for value in by_day[day]]
    for t, (d, value) in enumerate(tokens):
        values[f":t{t}"] = {"B": value}
        conditions.append(f"NOT contains(#k{d}, :t{t})")
    expression = f"ADD {', '.join(adds)} SET #u = if_not_exists(#u, :u), #l = :now, #c = :yes"
    return _counter_update(
        table, url_pk, counter, expression, " AND ".join(conditions), names, values, horizon_s, now_ms, by_day
    )


class Spill(NamedTuple):
    """A spill (docs/design.md, "Exactly once"): the items, written first, then the counter's update."""

    items: list[dict[str, Any]]
    update: dict[str, Any]


def spill(table: str, url_pk: str, counter: dict[str, Any], horizon_s: int, now_ms: int) -> Spill | None:
    """The spill of every live inline token of `counter` as read; None when it holds none."""
    live = {day: tokens for day, tokens in inline(counter).items() if live_day(day, horizon_s, now_ms)}
    if not any(live.values()):
        return None
    latest = {value: day for day, tokens in sorted(live.items()) for value in tokens}  # one item a token
    items = [
        {
            "pk": {"S": url_pk},
            "sk": {"S": spilled_sk(value)},
            "expires_at": {"N": str(day_expires_at_s(day, horizon_s))},
        }
        for value, day in sorted(latest.items())
    ]
    names: dict[str, str] = {}
    values: dict[str, Any] = {":next": {"N": str((spills(counter) or 0) + 1)}}
    condition = _guard(counter, names, values)
    expression = f"SET #ks = :next DELETE {', '.join(_day_sets(live, names, values))}"
    update = _counter_update(table, url_pk, counter, expression, condition, names, values, horizon_s, now_ms)
    return Spill(items, update)


def size_after(
    counter: dict[str, Any] | None,
    url_pk: str,
    url: str,
    views: Sequence[Marked],
    now_ms: int,
    *,
    last_counted: str,
    listed: str,
) -> int:
    """How big the counter is after count_request adds `views`, by item_sizes' rules (a dead
    day's set, which the count removes, still counted)."""
    item = dict(counter or view_layout.counter_key_of(url_pk))
    item.setdefault("url", {"S": url})
    item["views"] = {"N": str(attributes.integer(item, "views", 0) + len(views))}
    item[last_counted] = {"N": str(now_ms)}
    item[listed] = {"BOOL": True}
    for minute, k in Counter(v.minute for v in views if v.minute is not None).items():
        name = view_layout.pending_attribute(minute)
        item[name] = {"N": str(attributes.integer(item, name, 0) + k)}
    days = inline(counter)
    for v in views:
        days.setdefault(v.day, set()).add(v.token)
    for day, tokens in days.items():
        item[inline_attribute(day)] = {"BS": sorted(tokens)}
    return item_sizes.item_size(item)


def write_units(size: int) -> int:
    return max(1, -(-size // WRITE_UNIT_BYTES))


def spill_pays(counter: dict[str, Any] | None, size: int) -> bool:
    """Whether the counter's inline tokens cost a count of size `size` (size_after) a write unit more."""
    held = sum(len(tokens) * TOKEN_BYTES for tokens in inline(counter).values())
    return held > 0 and write_units(size) > write_units(size - held)
