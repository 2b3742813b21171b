"""Inline view markers (pure): the counting update, the spill, and when either is due."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core import item_sizes, times
from chalicelib.core.settings import Settings
from chalicelib.views import catalog, markers
from chalicelib.views import layout as view_keys
from chalicelib.views.validation import View

SETTINGS = Settings()
HORIZON = SETTINGS.view_horizon_seconds
NOW = 1_795_000_000_000
PK = "URL#" + "a" * 64
NAMES = {"last_counted": catalog.LAST_COUNTED, "listed": catalog.LISTED}

views_strategy = st.lists(
    st.tuples(st.integers(-3 * times.DAY_MS, 0), st.integers(0, 30), st.booleans()), min_size=1, max_size=50
)


def marked_of(offsets: list[tuple[int, int, bool]]) -> list[markers.Marked]:
    """Distinct views (time offset from NOW, client, whether its hour bucket is live)."""
    seen: dict[str, markers.Marked] = {}
    for offset, client, live in offsets:
        view = View("https://x.example/", NOW + offset, f"c{client}")
        sk = view_keys.marker_sk(view, "event")
        minute = view.time_ms // 60_000 if live else None
        seen.setdefault(sk, markers.Marked(markers.token(sk), markers.marker_day(view.time_ms), minute))
    return list(seen.values())


def request_for(counter: dict[str, Any] | None, views: list[markers.Marked]) -> dict[str, Any]:
    return markers.count_request("t", PK, "https://x.example/", counter, views, NOW, HORIZON, **NAMES)


def counter_with(days: dict[int, list[bytes]], spills: int | None = None, **extra: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"pk": {"S": PK}, "sk": {"S": "TOTAL"}, "views": {"N": "1"}, **extra}
    for day, tokens in days.items():
        item[markers.inline_attribute(day)] = {"BS": tokens}
    if spills is not None:
        item[markers.SPILLS] = {"N": str(spills)}
    return item


@given(views_strategy)
def test_given_views_when_counted_then_the_update_adds_each_once_by_minute_and_day_and_names_each_token(
    offsets: list[tuple[int, int, bool]],
) -> None:
    views = marked_of(offsets)
    request = request_for(None, views)
    names, values = request["ExpressionAttributeNames"], request["ExpressionAttributeValues"]
    adds = request["UpdateExpression"].removeprefix("ADD ").split(" SET ")[0].split(", ")
    added = {names[ref]: values[value] for ref, value in (a.split() for a in adds)}
    assert added["views"] == {"N": str(len(views))}
    minutes = Counter(f"p{v.minute}" for v in views if v.minute is not None)
    assert {n: int(v["N"]) for n, v in added.items() if n.startswith("p")} == dict(minutes)
    by_day: dict[str, set[bytes]] = {}
    for v in views:
        by_day.setdefault(markers.inline_attribute(v.day), set()).add(v.token)
    assert {n: set(v["BS"]) for n, v in added.items() if "BS" in v} == by_day
    condition = request["ConditionExpression"]
    assert condition.startswith("attribute_not_exists(#ks)"), "no spill since the (missing) counter was read"
    tokens = [v["B"] for k, v in values.items() if k.startswith(":t")]
    assert sorted(tokens) == sorted(v.token for v in views) and condition.count("NOT contains(") == len(views)


def test_given_a_counter_read_with_spills_and_dead_days_when_counted_then_guarded_by_its_spills_and_dead_sets_removed() -> (
    None
):
    today = markers.marker_day(NOW)
    dead = today - HORIZON // 86_400 - 2
    counter = counter_with({dead: [b"d" * 16], today: [b"t" * 16]}, spills=3)
    view = marked_of([(0, 1, True)])
    request = request_for(counter, view)
    assert "#ks = :ks" in request["ConditionExpression"] and request["ExpressionAttributeValues"][":ks"] == {"N": "3"}
    removed = request["UpdateExpression"].split(" REMOVE ")[1].split(", ")
    assert [request["ExpressionAttributeNames"][r] for r in removed] == [markers.inline_attribute(dead)]


@given(st.integers(0, 86_400_000 - 1), st.integers(-2 * 86_400, 2 * 86_400), st.sampled_from(["event", "client-day"]))
def test_given_any_view_of_a_day_when_its_set_is_judged_then_live_while_its_marker_is(
    offset: int, age_s: int, policy: str
) -> None:
    """A day's set (and a spilled marker of it) lives at least as long as every marker of it."""
    day_start = NOW - NOW % times.DAY_MS
    view_ms = day_start + offset
    expires = view_keys.marker_expires_at_s(view_ms, policy, HORIZON)
    now = expires * 1000 + age_s * 1000
    day = markers.marker_day(view_ms)
    assert markers.day_expires_at_s(day, HORIZON) >= expires
    if expires * 1000 > now:
        assert markers.live_day(day, HORIZON, now)


@given(st.lists(st.tuples(st.integers(0, 6), st.binary(min_size=16, max_size=16)), min_size=1, max_size=60))
def test_given_inline_tokens_when_spilled_then_one_item_per_live_token_and_the_update_deletes_exactly_those(
    placed: list[tuple[int, bytes]],
) -> None:
    today = markers.marker_day(NOW)
    days: dict[int, list[bytes]] = {}
    for back, value in placed:
        days.setdefault(today - back, [])
        if value not in days[today - back]:
            days[today - back].append(value)
    counter = counter_with(days, spills=None)
    plan = markers.spill("t", PK, counter, HORIZON, NOW)
    assert plan is not None
    expected = {markers.spilled_sk(v) for tokens in days.values() for v in tokens}
    assert {item["sk"]["S"] for item in plan.items} == expected and len(plan.items) == len(expected)
    for item in plan.items:
        assert int(item["expires_at"]["N"]) > NOW // 1000
    values, names = plan.update["ExpressionAttributeValues"], plan.update["ExpressionAttributeNames"]
    deleted = {
        names[r]: set(values[v]["BS"])
        for r, v in (d.split() for d in plan.update["UpdateExpression"].split(" DELETE ")[1].split(", "))
    }
    assert deleted == {markers.inline_attribute(d): set(t) for d, t in days.items()}
    assert values[":next"] == {"N": "1"} and plan.update["ConditionExpression"] == "attribute_not_exists(#ks)"


def test_given_a_counter_without_inline_tokens_when_spilled_then_nothing_to_do() -> None:
    assert markers.spill("t", PK, counter_with({}), HORIZON, NOW) is None


@given(st.integers(0, 80), st.integers(0, 80), st.integers(0, 600))
def test_given_inline_tokens_when_a_count_is_sized_then_spill_pays_exactly_when_they_add_a_write_unit(
    held: int, new: int, url_length: int
) -> None:
    today = markers.marker_day(NOW)
    counter = counter_with({today: [i.to_bytes(16, "big") for i in range(held)]} if held else {})
    counter["url"] = {"S": "u" * url_length}
    views = [markers.Marked((10_000 + i).to_bytes(16, "big"), today, None) for i in range(new)]
    size = markers.size_after(counter, PK, "u", views, NOW, **NAMES)
    without = markers.size_after(counter_with({}, url={"S": "u" * url_length}), PK, "u", views, NOW, **NAMES)
    assert size - without == 16 * held + (len(markers.inline_attribute(today)) if held and not new else 0)
    pays = markers.spill_pays(counter, size)
    assert pays == (held > 0 and markers.write_units(size) > markers.write_units(size - 16 * held))


def test_given_the_same_view_twice_when_tokened_then_the_same_token_and_16_bytes() -> None:
    view = View("u", NOW, "c")
    a, b = (markers.token(view_keys.marker_sk(view, "event")) for _ in range(2))
    assert a == b and len(a) == markers.TOKEN_BYTES
    assert markers.token(view_keys.marker_sk(View("u", NOW + 1, "c"), "event")) != a
    assert item_sizes.attribute_size({"BS": [a, b[::-1]]}) == 32
