"""PUT/GET /sites/{site} (time zone, goals), goals in the site summary against brute force under
resends and redelivery, the beacon's cached settings, and GET /sites/{site}/realtime."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chalicelib.sites import settings as site_settings
from tests.conftest import create_key
from tests.functional.helpers import invoke, receive_all, sqs_event
from tests.functional.site_helpers import FIREFOX, SETTINGS, Counting, beacon

SITE = "shop.example"
ORIGIN = "https://shop.example"
MINUTE = 60_000
GOALS = [{"name": "Signup", "event": "signup"}, {"name": "Pricing", "page": "/pricing"}]
AGENTS = [f"Mozilla/5.0 (X11; Linux x86_64) Firefox/{n}.0" for n in range(6)]


@pytest.fixture
def key(aws: Any) -> str:
    return create_key(aws, ["ingest"], origins=[ORIGIN])


@pytest.fixture
def counting(client: Any, aws: Any) -> Counting:
    return Counting(client, aws)


def put_settings(client: Any, body: Any, site: str = SITE) -> Any:
    return client.http.put(
        f"/sites/{site}", headers={"Content-Type": "application/json"}, body=json.dumps(body).encode()
    )


def view(clock: Any, path: str, ago_ms: int = 0, **more: Any) -> dict[str, Any]:
    return {"url": f"{ORIGIN}{path}", "time": clock.now - ago_ms, "referrer": "", "width": 1280, **more}


# -- settings ---------------------------------------------------------------------------------------


def test_given_no_settings_when_read_then_the_defaults(client: Any) -> None:
    answer = client.http.get(f"/sites/{SITE}")
    assert answer.status_code == 200
    assert answer.json_body == {"site": SITE, "timezone": "UTC", "goals": [], "updated": None}


def test_given_settings_when_put_then_read_back_and_a_kept_goal_keeps_its_since(client: Any, clock: Any) -> None:
    first = put_settings(client, {"timezone": "Asia/Kathmandu", "goals": GOALS})
    assert first.status_code == 200, first.body
    got = client.http.get(f"/sites/{SITE}").json_body
    assert got["timezone"] == "Asia/Kathmandu"
    assert [{k: v for k, v in g.items() if k != "since"} for g in got["goals"]] == GOALS
    since = got["goals"][0]["since"]
    clock.advance(3_600_000)
    renamed = [{"name": "Sign-up", "event": "signup"}, {"name": "Docs", "page": "/docs"}]
    assert put_settings(client, {"timezone": "Europe/Berlin", "goals": renamed}).status_code == 200
    again = client.http.get(f"/sites/{SITE}").json_body
    assert again["timezone"] == "Europe/Berlin"
    assert again["goals"][0] == {"name": "Sign-up", "event": "signup", "since": since}  # the same event: kept
    assert again["goals"][1]["since"] > since  # a new goal counts from now


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"timezone": "Mars/Olympus"},
        {"timezone": "../../etc/passwd"},
        {"timezone": 5},
        {"colour": "red"},
        {"goals": {"name": "x"}},
        {"goals": [{"name": "x", "event": "a", "page": "/a"}]},
        {"goals": [{"name": "x", "page": "pricing"}]},
        {"goals": [{"name": "", "event": "a"}]},
        {"goals": [{"name": "tab\there", "event": "a"}]},
        {"goals": [{"name": "x" * 61, "event": "a"}]},
        {"goals": [{"name": "x", "event": "no spaces"}]},
        {"goals": [{"name": "x", "event": "pageview"}]},
        {"goals": [{"name": "x", "event": "e" * 201}]},
        {"goals": [{"name": "x", "page": "/" + "p" * 200}]},
        {"goals": [{"name": f"g{i}", "event": f"e{i}"} for i in range(site_settings.MAX_GOALS + 1)]},
    ],
)
def test_given_bad_settings_when_put_then_400_in_chalices_shape_and_nothing_changed(client: Any, body: Any) -> None:
    assert put_settings(client, {"timezone": "Asia/Kolkata", "goals": GOALS[:1]}).status_code == 200
    before = client.http.get(f"/sites/{SITE}").json_body
    answer = put_settings(client, body)
    assert answer.status_code == 400, (body, answer.body)
    assert set(answer.json_body) == {"Code", "Message"}
    assert client.http.get(f"/sites/{SITE}").json_body == before


def test_given_a_read_key_when_settings_are_read_or_put_then_403(client: Any, aws: Any) -> None:
    reader = create_key(aws, ["read"])
    assert client.http.with_key(reader).get(f"/sites/{SITE}").status_code == 403
    answer = client.http.with_key(reader).put(f"/sites/{SITE}", body=b"{}")
    assert answer.status_code == 403


def test_given_a_bad_site_name_when_settings_are_read_then_400(client: Any) -> None:
    assert client.http.get("/sites/bad%20site").status_code == 400


# -- goals ---------------------------------------------------------------------------------------------


def test_given_goals_when_visitors_convert_more_than_once_under_resends_then_the_summary_is_the_brute_force(
    client: Any, aws: Any, clock: Any, key: str, counting: Counting
) -> None:
    import random

    assert put_settings(client, {"goals": GOALS}).status_code == 200
    rng = random.Random(7)
    pricing_views, signups, pricing_visitors, signup_visitors, visitors = 0, 0, set(), set(), set()
    for i in range(60):
        agent = rng.choice(AGENTS)
        visitors.add(agent)
        if rng.random() < 0.3:
            body = view(clock, "/", ago_ms=i * 1000, event="signup")
            signups, _ = signups + 1, signup_visitors.add(agent)
        else:
            path = rng.choice(["/pricing", "/", "/docs", "/pricing#/annual"])
            body = view(clock, path, ago_ms=i * 1000)
            if path == "/pricing":
                pricing_views, _ = pricing_views + 1, pricing_visitors.add(agent)
        assert beacon(client, key, body, agent=agent, origin=ORIGIN).json_body["counted"]
        if i % 5 == 0:
            beacon(client, key, body, agent=agent, origin=ORIGIN)  # a resend
    counting.process()
    counting.redeliver()
    counting.process()
    got = client.http.get(f"/sites/{SITE}/summary?window=1h").json_body
    assert got["visitors"] == len(visitors)
    by_name = {g["name"]: g for g in got["goals"]}
    assert (by_name["Signup"]["conversions"], by_name["Signup"]["visitors"]) == (signups, len(signup_visitors))
    assert (by_name["Pricing"]["conversions"], by_name["Pricing"]["visitors"]) == (pricing_views, len(pricing_visitors))
    assert pricing_views > len(pricing_visitors) and signups > len(signup_visitors)  # some converted twice
    for name, converted in (("Signup", signup_visitors), ("Pricing", pricing_visitors)):
        assert by_name[name]["conversion_rate"] == round(len(converted) / len(visitors), 4)
        assert by_name[name]["visitors_exact"] is True


def test_given_uniques_redelivered_when_the_summary_is_read_then_goal_visitors_are_unchanged(
    client: Any, aws: Any, clock: Any, key: str
) -> None:

    assert put_settings(client, {"goals": GOALS}).status_code == 200
    for agent in AGENTS[:3]:
        beacon(client, key, view(clock, "/pricing"), agent=agent, origin=ORIGIN)
    messages = receive_all(aws, SETTINGS.uniques_queue)
    for _ in range(2):  # the same batch twice, as SQS may deliver it
        invoke(client, "on_unique_items", sqs_event(messages))
    got = client.http.get(f"/sites/{SITE}/summary?window=1h").json_body
    assert [(g["name"], g["visitors"]) for g in got["goals"]] == [("Signup", 0), ("Pricing", 3)]
    assert got["goals"][1]["conversion_rate"] == 1.0


def test_given_a_page_view_matching_no_goal_when_beaconed_then_nothing_more_is_queued(
    client: Any, aws: Any, clock: Any, key: str
) -> None:

    assert put_settings(client, {"goals": GOALS}).status_code == 200
    beacon(client, key, view(clock, "/docs"), origin=ORIGIN)
    assert len(receive_all(aws, SETTINGS.uniques_queue)) == 1  # the site's visitor only
    beacon(client, key, view(clock, "/pricing"), origin=ORIGIN)
    assert len(receive_all(aws, SETTINGS.uniques_queue)) == 2  # the site's and the goal's


def test_given_settings_changed_by_another_process_when_beaconed_then_used_within_the_cache_time(
    client: Any, aws: Any, clock: Any, key: str
) -> None:

    beacon(client, key, view(clock, "/pricing"), origin=ORIGIN)  # caches "no goals" for this process
    receive_all(aws, SETTINGS.uniques_queue)
    from chalicelib.core.aws import AwsClients

    # Another process (its own client) stores goals: this one's cache is not told.
    new = site_settings.parse_body(SITE, {"goals": GOALS}, site_settings.SiteSettings(SITE), clock.now)
    site_settings.write(AwsClients(SETTINGS).dynamodb, SETTINGS, new)
    clock.advance(site_settings.CACHE_SECONDS * 1000 - 1000)
    beacon(client, key, view(clock, "/pricing"), origin=ORIGIN)
    assert len(receive_all(aws, SETTINGS.uniques_queue)) == 1  # still the cached settings
    clock.advance(1000)
    beacon(client, key, view(clock, "/pricing"), origin=ORIGIN)
    assert len(receive_all(aws, SETTINGS.uniques_queue)) == 2  # read again: the goal counts


# -- realtime -----------------------------------------------------------------------------------------


def realtime(client: Any) -> dict[str, Any]:
    answer = client.http.get(f"/sites/{SITE}/realtime")
    assert answer.status_code == 200, answer.body
    return dict(answer.json_body)


def test_given_visitors_when_the_clock_moves_then_they_appear_and_age_out_after_five_minutes(
    client: Any, aws: Any, clock: Any, key: str, counting: Counting
) -> None:
    clock.now -= clock.now % MINUTE  # the start of a minute
    assert realtime(client)["visitors"] == 0
    beacon(client, key, view(clock, "/a"), origin=ORIGIN)
    beacon(client, key, view(clock, "/a"), origin=ORIGIN)  # a resend
    clock.advance(2 * MINUTE)
    beacon(client, key, view(clock, "/b"), agent=FIREFOX, origin=ORIGIN)
    beacon(client, key, view(clock, "/c"), origin=ORIGIN)  # the first visitor again
    counting.process()
    got = realtime(client)
    assert (got["visitors"], got["visitors_exact"]) == (2, True)
    assert len(got["pageviews"]) == 30
    assert [b["pageviews"] for b in got["pageviews"][-3:]] == [1, 0, 2]
    clock.advance(3 * MINUTE)  # the first minute is out of the last five
    assert realtime(client)["visitors"] == 2  # both seen two minutes later still
    clock.advance(2 * MINUTE)
    assert realtime(client)["visitors"] == 0
    assert sum(b["pageviews"] for b in realtime(client)["pageviews"]) == 3
    clock.advance(30 * MINUTE)
    assert sum(b["pageviews"] for b in realtime(client)["pageviews"]) == 0


def test_given_an_old_resend_when_counted_then_it_is_not_among_the_visitors_now(
    client: Any, aws: Any, clock: Any, key: str, counting: Counting
) -> None:
    beacon(client, key, view(clock, "/a", ago_ms=10 * MINUTE), origin=ORIGIN)
    counting.process()
    assert realtime(client)["visitors"] == 0
    beacon(client, key, view(clock, "/a", ago_ms=4 * MINUTE), origin=ORIGIN)
    counting.process()
    assert realtime(client)["visitors"] == 1


def test_given_a_batch_delivered_twice_when_read_then_each_visitor_once(
    client: Any, aws: Any, clock: Any, key: str
) -> None:
    for i, agent in enumerate(AGENTS):
        beacon(client, key, view(clock, f"/p{i}"), agent=agent, origin=ORIGIN)
    sent = receive_all(aws, SETTINGS.uniques_queue)
    for batch in (sent, sent[:3], sent):  # whole, a part, whole again: at least once, in any grouping
        invoke(client, "on_unique_items", sqs_event(batch))
    got = realtime(client)
    assert (got["visitors"], got["visitors_exact"]) == (len(AGENTS), True)


def test_given_more_visitors_than_a_sketch_holds_exactly_when_read_then_an_estimate_within_its_error(
    client: Any, aws: Any, clock: Any
) -> None:
    from chalicelib.sites import names
    from chalicelib.uniques import api as uniques_api

    visitors = [f"{i:032x}" for i in range(2000)]
    for start in range(0, len(visitors), 500):
        post = uniques_api.Post(visitors[start : start + 500], clock.now)
        uniques_api.enqueue(aws.sqs, SETTINGS, b"k" * 32, names.visitors_name(SITE), post, minute=True)
    Counting(client, aws).process()
    got = realtime(client)
    assert got["visitors_exact"] is False
    assert abs(got["visitors"] - 2000) <= 2000 * 3 * SETTINGS.uniques_error_rate


def test_given_a_prefix_limited_read_key_when_realtime_is_read_then_403(client: Any, aws: Any) -> None:
    reader = create_key(aws, ["read"], prefix="site:")
    assert client.http.with_key(reader).get(f"/sites/{SITE}/realtime").status_code == 403


def test_given_the_contract_when_read_then_its_settings_bounds_are_the_codes() -> None:
    from chalicelib.contract import schemas
    from chalicelib.sites import api as realtime_module

    assert schemas.MAX_GOALS == site_settings.MAX_GOALS
    assert schemas.GOAL_NAME_MAX_CHARS == site_settings.GOAL_NAME_MAX_CHARS
    assert schemas.GOAL_PAGE_MAX_CHARS == site_settings.GOAL_PAGE_MAX_CHARS
    assert schemas.SITE_REALTIME["properties"]["pageviews"]["maxItems"] == realtime_module.PAGEVIEW_MINUTES
