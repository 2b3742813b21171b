"""POST /beacon/pageview: page views counted through views, unique counts and counters, once
under resends; bots not counted; the key's origins enforced; bad input refused, nothing queued."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from chalicelib.contract import schemas
from chalicelib.core import keyspace
from chalicelib.sites import beacon as site_beacon
from tests.conftest import create_key
from tests.functional.site_helpers import FIREFOX, GOOGLEBOT, SETTINGS, Counting, beacon, left_behind

SITE = "blog.example"
ORIGIN = "https://blog.example"
MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR


@pytest.fixture
def key(aws: Any) -> str:
    return create_key(aws, ["ingest"], origins=[ORIGIN])


@pytest.fixture
def counting(client: Any, aws: Any) -> Counting:
    return Counting(client, aws)


def view(clock: Any, path: str = "/posts/1", ago_ms: int = 0, **more: Any) -> dict[str, Any]:
    return {"url": f"{ORIGIN}{path}", "time": clock.now - ago_ms, "referrer": "", "width": 1280, **more}


def views_of(client: Any, url: str) -> int:
    return int(client.http.get(f"/views?url={quote(url, safe='')}").json_body["views"])


def pageviews(client: Any, counter: str = f"site:{SITE}") -> int:
    return int(client.http.get(f"/counters/{counter}?window=1d").json_body["count"])


def visitors(client: Any) -> int:
    return int(client.http.get(f"/hyperloglog/site:{SITE}?window=1d").json_body["cardinality"])


def test_given_a_page_view_when_beaconed_then_counted_as_a_view_a_visitor_and_a_pageview_event(
    client: Any, aws: Any, clock: Any, key: str, counting: Counting
) -> None:
    answer = beacon(client, key, view(clock), origin=ORIGIN)
    assert answer.status_code == 202, answer.body
    assert answer.json_body == {"counted": True, "site": SITE}
    counting.process()
    assert views_of(client, f"{ORIGIN}/posts/1") == 1
    assert pageviews(client) == 1
    assert visitors(client) == 1


def test_given_a_resent_beacon_when_counted_then_it_counts_once_on_every_path(
    client: Any, aws: Any, clock: Any, key: str, counting: Counting
) -> None:
    body = view(clock, "/a?utm_source=news&utm_medium=email&utm_campaign=launch")
    for _ in range(3):
        assert beacon(client, key, body, origin=ORIGIN).status_code == 202
        counting.process()
        counting.redeliver()
    assert views_of(client, f"{ORIGIN}/a") == 1
    assert pageviews(client) == 1
    assert pageviews(client, f"site-utm:{SITE}") == 1
    assert visitors(client) == 1


def test_given_a_reload_and_a_second_visitor_when_counted_then_views_add_and_visitors_are_two(
    client: Any, aws: Any, clock: Any, key: str, counting: Counting
) -> None:
    beacon(client, key, view(clock, ago_ms=5000), origin=ORIGIN)
    beacon(client, key, view(clock), origin=ORIGIN)  # the same visitor reloads
    beacon(client, key, view(clock), agent=FIREFOX, origin=ORIGIN)  # another visitor, the same moment
    beacon(client, key, view(clock, "/posts/2"), agent=FIREFOX, origin=ORIGIN)
    counting.process()
    assert views_of(client, f"{ORIGIN}/posts/1") == 3
    assert pageviews(client) == 4
    assert visitors(client) == 2


def test_given_a_known_bot_when_it_beacons_then_refused_and_only_its_refusal_is_stored(
    client: Any, aws: Any, clock: Any, key: str
) -> None:
    for agent in (GOOGLEBOT, "curl/8.5.0", ""):
        answer = beacon(client, key, view(clock), agent=agent, origin=ORIGIN)
        assert answer.status_code == 202
        assert answer.json_body == {"counted": False, "site": None, "reason": "bot"}
    stored = aws.dynamodb.scan(TableName=SETTINGS.events_table)["Items"]
    assert left_behind(aws) == len(stored) == 3  # no view, no visitor: one bots event each
    assert all(item["counter"]["S"] == f"site-bots:{SITE}" for item in stored), stored


def bots(client: Any, site: str = SITE) -> int:
    return int(client.http.get(f"/sites/{site}/summary?window=1h").json_body["bots"])


def test_given_a_resent_bot_beacon_when_the_summary_is_read_then_bots_counts_it_once(
    client: Any, aws: Any, clock: Any, key: str, counting: Counting
) -> None:
    body = view(clock)
    for _ in range(3):
        answer = beacon(client, key, body, agent=GOOGLEBOT, origin=ORIGIN)
        assert answer.json_body == {"counted": False, "site": None, "reason": "bot"}
        counting.process()
        counting.redeliver()
    beacon(client, key, view(clock, "/posts/2"), agent="curl/8.5.0", origin=ORIGIN)
    counting.process()
    got = client.http.get(f"/sites/{SITE}/summary?window=1h").json_body
    assert (got["bots"], got["pageviews"], got["visitors"]) == (2, 0, 0)


def test_given_a_browsers_page_view_when_the_summary_is_read_then_it_is_no_bot(
    client: Any, aws: Any, clock: Any, key: str, counting: Counting
) -> None:
    beacon(client, key, view(clock), agent=FIREFOX, origin=ORIGIN)
    beacon(client, key, view(clock, "/posts/2"), origin=ORIGIN)
    counting.process()
    got = client.http.get(f"/sites/{SITE}/summary?window=1h").json_body
    assert (got["bots"], got["pageviews"]) == (0, 2)


def test_given_bots_of_another_site_when_the_summary_is_read_then_they_are_not_counted(
    client: Any, aws: Any, clock: Any, key: str, counting: Counting
) -> None:
    beacon(client, key, view(clock, site="other.example"), agent=GOOGLEBOT, origin=ORIGIN)
    beacon(client, key, view(clock, "/posts/2", site="other.example"), agent=GOOGLEBOT, origin=ORIGIN)
    beacon(client, key, view(clock), agent=GOOGLEBOT, origin=ORIGIN)
    counting.process()
    assert (bots(client), bots(client, "other.example")) == (1, 2)


def test_given_an_origin_the_key_does_not_list_when_it_beacons_then_403_and_nothing_counted(
    client: Any, aws: Any, clock: Any, key: str
) -> None:
    answer = beacon(client, key, view(clock), origin="https://elsewhere.example")
    assert answer.status_code == 403
    assert set(answer.json_body) == {"Code", "Message"}
    assert beacon(client, "not-a-key", view(clock), origin=ORIGIN).status_code == 401
    read_key = create_key(aws, ["read"])
    assert beacon(client, read_key, view(clock), origin=ORIGIN).status_code == 403
    assert left_behind(aws) == 0


@pytest.mark.parametrize(
    ("body", "names"),
    [
        ({"url": "ftp://blog.example/", "time": 0}, "url"),
        ({"url": "/relative", "time": 0}, "url"),
        ({"time": 0}, "url"),
        ({"url": f"{ORIGIN}/"}, "time"),
        ({"url": f"{ORIGIN}/", "time": -2 * 86_400_000}, "day old"),
        ({"url": f"{ORIGIN}/", "time": 3_600_000}, "future"),
        ({"url": f"{ORIGIN}/", "time": 0, "width": -1}, "width"),
        ({"url": f"{ORIGIN}/", "time": 0, "site": "a b"}, "site"),
        ({"url": f"{ORIGIN}/", "time": 0, "site": "s" * 181}, "site"),
        ({"url": f"{ORIGIN}/", "time": 0, "cookie": "x"}, "unknown"),
        ({"url": f"{ORIGIN}/", "time": 0, "dimensions": {"a": "b"}}, "custom events"),
        ({"url": f"{ORIGIN}/", "time": 0, "event": "signup", "dimensions": {"a": 1}}, "dimensions"),
        ({"url": f"{ORIGIN}/", "time": 0, "event": "signup", "values": {"amount": 1e18}}, "event.values.amount"),
        ({"url": f"{ORIGIN}/", "time": 0, "event": "signup", "values": {"amount": 1e-7}}, "event.values.amount"),
        ({"url": f"{ORIGIN}/", "time": 0, "event": "signup", "values": {"amount": 1e300}}, "values.amount"),
    ],
)
def test_given_bad_input_when_beaconed_then_400_in_chalices_shape_and_nothing_counted(
    client: Any, aws: Any, clock: Any, key: str, body: dict[str, Any], names: str
) -> None:
    if "time" in body:
        body = {**body, "time": clock.now + body["time"]}
    answer = beacon(client, key, body, origin=ORIGIN)
    assert answer.status_code == 400, answer.body
    assert answer.json_body["Code"] == "BadRequestError"
    assert names in answer.json_body["Message"]
    assert left_behind(aws) == 0


def test_given_a_custom_event_when_beaconed_then_counted_once_with_its_dimensions_and_values(
    client: Any, aws: Any, clock: Any, key: str, counting: Counting
) -> None:
    body = view(clock, event="signup", dimensions={"plan": "pro"}, values={"amount": 12.5})
    assert beacon(client, key, body, origin=ORIGIN).status_code == 202
    assert beacon(client, key, body, origin=ORIGIN).status_code == 202
    counting.process()
    answer = client.http.get(f"/counters/site-event:{SITE}:signup?window=1d").json_body
    assert answer["count"] == 1
    assert pageviews(client) == 0 and visitors(client) == 0


def test_given_data_site_when_beaconed_then_counted_under_that_site(
    client: Any, aws: Any, clock: Any, key: str, counting: Counting
) -> None:
    assert beacon(client, key, view(clock, site="docs.example"), origin=ORIGIN).json_body["site"] == "docs.example"
    counting.process()
    assert pageviews(client, "site:docs.example") == 1


def test_given_the_contract_when_read_then_its_beacon_bounds_are_the_codes() -> None:
    from chalicelib.sites import names as site_keys

    assert schemas.BEACON_WIDTH_MAX == site_beacon.MAX_WIDTH
    assert schemas.SITE_MAX_CHARS == site_keys.SITE_MAX_CHARS


def test_given_no_key_when_tally_js_requested_then_the_script_with_its_etag(client: Any) -> None:
    answer = client.http.with_key(None).get("/tally.js")
    assert answer.status_code == 200
    assert answer.headers["Content-Type"].startswith("text/javascript")
    assert "sendBeacon" in answer.body.decode()
    again = client.http.with_key(None).get("/tally.js", headers={"If-None-Match": answer.headers["ETag"]})
    assert again.status_code == 304


def test_given_page_views_of_two_sites_when_sites_listed_then_each_once_by_name(
    client: Any, aws: Any, clock: Any, key: str
) -> None:
    beacon(client, key, view(clock), origin=ORIGIN)
    beacon(client, key, view(clock, "/b"), origin=ORIGIN)
    beacon(client, key, view(clock, site="docs.example"), origin=ORIGIN)
    answer = client.http.get("/sites").json_body
    assert [entry["site"] for entry in answer["sites"]] == ["blog.example", "docs.example"]
    assert answer["next"] is None


PATH_VALUES = {
    "counter": f"site:{SITE}",
    "name": f"site:{SITE}",
    "site": SITE,
    "report_id": "20261118T000000000Z-20261118T010000000Z",
    "key_id": "0" * 16,
}


def test_given_a_days_salt_when_every_route_is_read_then_no_answer_holds_it(
    client: Any, aws: Any, clock: Any, key: str, counting: Counting, app_module: Any
) -> None:
    import base64

    from tests.functional.helpers import partition

    beacon(client, key, view(clock, "/?utm_source=news"), origin=ORIGIN)
    counting.process()
    (item,) = partition(aws.dynamodb, keyspace.SALT)
    from chalicelib.sites import salts

    salt = salts.unseal(aws.item_key, int(item["sk"]["S"].removeprefix("d#")), bytes(item["sealed"]["B"]))
    forms = [
        salt.hex(),
        salt.hex().upper(),
        base64.b64encode(salt).decode(),
        base64.urlsafe_b64encode(salt).decode().rstrip("="),
        keyspace.SALT,
    ]
    read = 0
    for path, methods in app_module.app.routes.items():
        if "GET" not in methods:
            continue
        filled = path.replace("/dashboard/{name}", "/dashboard/dashboard.js")
        for param, value in PATH_VALUES.items():
            filled = filled.replace("{" + param + "}", quote(value, safe=":"))
        for query in ("", "?window=1d", "?url=" + quote(f"{ORIGIN}/", safe="")):
            answer = client.http.get(filled + query)
            body = answer.body.decode("latin-1") if isinstance(answer.body, bytes) else str(answer.body)
            assert not any(form in body for form in forms), (filled, query)
            read += answer.status_code == 200
    again = beacon(client, key, view(clock, "/b"), origin=ORIGIN)
    assert not any(form in again.body.decode("latin-1") for form in forms)
    assert read >= 40  # most routes answered with data, not a refusal


def test_given_page_views_when_the_summary_is_read_then_each_list_is_the_brute_force_ranking(
    client: Any, aws: Any, clock: Any, key: str, counting: Counting
) -> None:
    import collections
    import random

    rng = random.Random(19)
    agents = [f"Mozilla/5.0 (X11; Linux x86_64) Firefox/{n}.0" for n in range(5)]
    referrers = ["", "https://www.news.example/a", "https://search.example/?q=x", f"{ORIGIN}/home"]
    sent = []
    for i in range(40):
        path, source = f"/p{rng.randrange(6)}", rng.choice(["", "news", "mail"])
        url = path + (f"?utm_source={source}&utm_campaign=c{i % 2}" if source else "")
        body = view(
            clock, url, ago_ms=i * 1000, referrer=rng.choice(referrers), width=rng.choice([400, 800, 1300, 2000])
        )
        agent = rng.choice(agents)
        assert beacon(client, key, body, agent=agent, origin=ORIGIN).json_body["counted"]
        sent.append((path, body, source, agent))
        if i % 7 == 0:  # resent
            beacon(client, key, body, agent=agent, origin=ORIGIN)
    counting.process()
    counting.redeliver()
    got = client.http.get(f"/sites/{SITE}/summary?window=1h&limit=3").json_body
    assert (got["site"], got["pageviews"], got["visitors"]) == (SITE, 40, len({a for *_, a in sent}))

    host = {"": "(direct)", referrers[1]: "news.example", referrers[2]: "search.example", referrers[3]: "(direct)"}
    devices = {400: "mobile", 800: "tablet", 1300: "laptop", 2000: "desktop"}
    expected = {
        "pages": ("path", [p for p, *_ in sent]),
        "referrers": ("referrer", [host[b["referrer"]] for _, b, *_ in sent]),
        "sources": ("source", [s or "(none)" for _, _, s, _ in sent]),
        "devices": ("device", [devices[b["width"]] for _, b, *_ in sent]),
    }
    for field, (label, values) in expected.items():
        listed = got[field]
        counts = [entry["pageviews"] for entry in listed]
        assert counts == sorted(counts, reverse=True) and len(listed) <= 3
        truth = collections.Counter(values)
        for entry in listed:
            assert truth[entry[label]] == entry["pageviews"], (field, entry)
        assert sum(counts) + got["others"][field]["pageviews"] == len(values), field
        assert len(listed) + got["others"][field]["values"] == len(truth), field
        assert min(counts) >= max([n for v, n in truth.items() if v not in {e[label] for e in listed}], default=0)
    campaigns = client.http.get(f"/counters/site-utm:{SITE}/breakdown?by=campaign&window=1h").json_body
    truth = collections.Counter(f"c{i % 2}" for i, (_, _, s, _) in enumerate(sent) if s)
    assert {v["value"]: v["count"] for v in campaigns["values"]} == dict(truth)


@pytest.mark.parametrize("query", ["window=1x", "limit=0", "limit=1001", "window=1d&start=2026-01-01T00:00:00Z"])
def test_given_bad_summary_parameters_when_read_then_400(client: Any, query: str) -> None:
    answer = client.http.get(f"/sites/{SITE}/summary?{query}")
    assert answer.status_code == 400 and set(answer.json_body) == {"Code", "Message"}


def test_given_a_bad_site_name_when_its_summary_is_read_then_400(client: Any) -> None:
    assert client.http.get("/sites/a%20b/summary").status_code == 400


def test_given_a_prefix_limited_read_key_when_a_summary_or_the_sites_are_read_then_403(client: Any, aws: Any) -> None:
    limited = create_key(aws, ["read"], prefix="site:")
    for path in (f"/sites/{SITE}/summary", "/sites"):
        assert client.http.with_key(limited).get(path).status_code == 403


def test_given_a_page_view_when_beaconed_then_the_route_does_bounded_work(
    client: Any, aws: Any, clock: Any, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.functional import work_meter

    beacon(client, key, view(clock, "/first"), origin=ORIGIN)  # the day's salt and the site's catalog item
    meter = work_meter.install(aws, monkeypatch)
    for i in range(20):
        assert beacon(client, key, view(clock, f"/p{i}?utm_source=s{i}"), origin=ORIGIN).status_code == 202
    # Per page view: the view and the visitor queued, its two events stored (the visitor's minute,
    # for realtime, rides on its queued message); the salt, the site's settings and the catalog
    # are read or written once per process and day, minute or hour.
    per_view = {"batch_write_item", "send_message", "send_message_batch"}
    assert sorted(set(meter.writes)) == sorted(per_view)
    assert len(meter.writes) == 20 * 3
    others = sorted(c for c in meter.calls if c not in per_view)
    # Once per process (this meter wraps the client anew, so its caches start empty): the two
    # queues' URLs, the day's salt, the site's settings, the site in the catalog (once an hour).
    assert others == ["get_item", "get_item", "get_queue_url", "get_queue_url", "update_item"], others


@pytest.mark.parametrize(
    ("views", "pages", "utm", "most_per_view"),
    [(1, 1, False, 35), (1, 1, True, 50), (100, 5, False, 3), (50, 50, False, 8)],
)
def test_given_page_views_when_counted_then_the_writes_per_view_are_bounded(
    client: Any,
    aws: Any,
    clock: Any,
    key: str,
    counting: Counting,
    monkeypatch: pytest.MonkeyPatch,
    views: int,
    pages: int,
    utm: bool,
    most_per_view: int,
) -> None:
    """DynamoDB item writes (PutItem, UpdateItem, transactions) of the background handlers per
    page view, all paths together (views, uniques, counters with their filters and breakdown
    summaries); docs/tracker.md quotes what `-s` prints."""
    import collections

    from tests.functional import work_meter

    query = "?utm_source=news&utm_medium=email" if utm else ""
    for i in range(views):
        body = view(clock, f"/p{i % pages}{query}", ago_ms=i * 100, width=300 + i * 37 % 2000)
        assert beacon(client, key, body, origin=ORIGIN).status_code == 202
    meter = work_meter.install(aws, monkeypatch)
    counting.process()
    writes = collections.Counter(w for w in meter.writes if w in {"put_item", "update_item", "transact_write_items"})
    per_view = sum(writes.values()) / views
    print(f"\n{views} page views of {pages} pages, utm={utm}: {dict(writes)}, {per_view:.1f} item writes a view")
    assert pageviews(client) == views
    assert per_view <= most_per_view


def test_given_a_beacon_resent_after_midnight_when_counted_then_once_and_a_new_days_view_is_a_new_visitor(
    client: Any, aws: Any, clock: Any, key: str, counting: Counting
) -> None:
    day_ms = 86_400_000
    clock.now = (clock.now // day_ms + 1) * day_ms - 60_000  # 23:59 UTC
    body = view(clock, "/late")
    assert beacon(client, key, body, origin=ORIGIN).json_body["counted"]
    clock.advance(120_000)  # 00:01 the next day: the same beacon again, with its own time
    assert beacon(client, key, body, origin=ORIGIN).json_body["counted"]
    assert beacon(client, key, view(clock, "/late"), origin=ORIGIN).json_body["counted"]  # a new view today
    counting.process()
    assert views_of(client, f"{ORIGIN}/late") == 2
    assert pageviews(client) == 2
    # The same browser on two days: two visitor ids (each day's salt), so two in a window over both.
    assert visitors(client) == 2


def test_given_page_views_when_25_hours_then_29_days_pass_then_a_30_day_summary_still_counts_them(
    client: Any, aws: Any, clock: Any, key: str, counting: Counting
) -> None:
    for i, path in enumerate(["/a", "/a", "/b"]):
        assert beacon(client, key, view(clock, path, ago_ms=i * 1000), origin=ORIGIN).json_body["counted"]
    counting.process()
    start = clock.now
    for later_ms in (25 * HOUR + MINUTE, 29 * DAY):
        clock.advance(start + later_ms - clock.now)
        got = client.http.get(f"/sites/{SITE}/summary?window=30d").json_body
        assert (got["pageviews"], got["visitors"], got["complete"]) == (3, 1, True), later_ms
        assert {p["path"]: p["pageviews"] for p in got["pages"]} == {"/a": 2, "/b": 1}
        assert client.http.get(f"/counters/site:{SITE}?window=30d").json_body["count"] == 3
        assert [s["site"] for s in client.http.get("/sites").json_body["sites"]] == [SITE]


@pytest.mark.parametrize("before_ms", [1_000, 30_000, 59 * 60_000])
def test_given_page_views_just_before_the_hour_when_the_summary_is_read_after_it_then_their_visitors_still_count(
    client: Any, aws: Any, clock: Any, key: str, counting: Counting, before_ms: int
) -> None:
    hour_ms = 3_600_000
    top = (clock.now // hour_ms + 1) * hour_ms
    clock.now = top - before_ms
    first = view(clock, "/a")
    for body in (first, view(clock, "/b")):
        assert beacon(client, key, body, origin=ORIGIN).json_body["counted"]
    assert beacon(client, key, view(clock, "/a"), agent=FIREFOX, origin=ORIGIN).json_body["counted"]
    counting.process()

    def read() -> tuple[int, int]:
        got = client.http.get(f"/sites/{SITE}/summary?window=1h").json_body
        return got["pageviews"], got["visitors"]

    assert read() == (3, 2)
    clock.now = top + 10_000  # the hour turns: the page views are still within the last hour
    assert read() == (3, 2)
    assert beacon(client, key, first, origin=ORIGIN).json_body["counted"]  # resent after the hour
    counting.process()
    assert read() == (3, 2)
    got = client.http.get(f"/sites/{SITE}/summary?window=1h").json_body
    assert got["visitors_start"] <= got["start"] and got["end"] <= got["visitors_end"]


def test_given_the_longest_window_not_on_the_hour_when_the_summary_is_read_then_its_visitors_cover_it(
    client: Any, aws: Any, clock: Any, key: str, counting: Counting
) -> None:
    hour_ms = 3_600_000
    clock.now = (clock.now // hour_ms) * hour_ms + 30 * 60_000  # half past
    assert beacon(client, key, view(clock), origin=ORIGIN).json_body["counted"]
    counting.process()
    answer = client.http.get(f"/sites/{SITE}/summary?window=400d")
    assert answer.status_code == 200, answer.body
    got = answer.json_body
    assert (got["pageviews"], got["visitors"]) == (1, 1)
    assert got["visitors_start"] <= got["start"] and got["end"] <= got["visitors_end"]


def test_given_the_longest_window_when_the_summary_is_read_then_its_bots_cost_one_count_window(
    client: Any, aws: Any, clock: Any, key: str, counting: Counting, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.functional import work_meter

    beacon(client, key, view(clock), origin=ORIGIN)
    beacon(client, key, view(clock), agent=GOOGLEBOT, origin=ORIGIN)
    counting.process()
    bots_read = client.http.get(f"/counters/site-bots:{SITE}?window=400d").json_body
    meter = work_meter.install(aws, monkeypatch)
    got = client.http.get(f"/sites/{SITE}/summary?window=400d").json_body
    assert (got["pageviews"], got["bots"], bots_read["count"]) == (1, 1, 1)
    # The bots are one count window of their counter: its days and the hours at its two ends
    # (with their days), at most 426 keys in at most 5 BatchGetItem calls of 100 keys.
    assert bots_read["keys_read"] <= 400 + 24 + 2
    # Besides them, one GetItem: the site's settings (it has no goals, so nothing more).
    assert set(meter.calls) == {"batch_get_item", "get_item"} and meter.calls.count("get_item") == 1
    assert len(meter.calls) <= 187, len(meter.calls)
