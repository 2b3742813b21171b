"""GET /sites/{site}/summary in a time zone: page views and visitors of a local day counted
from its midnight (18:30 UTC in Asia/Kolkata, 18:15 in Asia/Kathmandu), and `compare`."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest

from chalicelib.core import times
from tests.conftest import create_key
from tests.functional.site_helpers import CHROME, Counting, beacon

SITE = "blog.example"
ORIGIN = "https://blog.example"
MINUTE_MS = 60_000


@pytest.fixture
def key(aws: Any) -> str:
    return create_key(aws, ["ingest"], origins=[ORIGIN])


def summary(client: Any, **params: Any) -> dict[str, Any]:
    response = client.http.get(f"/sites/{SITE}/summary?{urlencode(params)}")
    assert response.status_code == 200, response.body
    answer: dict[str, Any] = response.json_body
    return answer


@pytest.mark.parametrize(("zone", "midnight"), [("Asia/Kolkata", "18:30"), ("Asia/Kathmandu", "18:15")])
def test_given_page_views_around_local_midnight_when_today_is_summarised_then_only_those_after_it_count(
    client: Any, aws: Any, clock: Any, key: str, zone: str, midnight: str
) -> None:
    start = times.parse(f"2026-11-17T{midnight}:00Z")  # local midnight of 18 November
    clock.now = start + 40 * MINUTE_MS
    # yesterday: visitors a and b at 5 and 1 minutes before midnight; today: b again, c and d
    for who, offset, path in (
        ("a", -5, "/old"),
        ("b", -1, "/old"),
        ("b", 0, "/new"),
        ("c", 7, "/new"),
        ("d", 39, "/x"),
    ):
        body = {"url": f"{ORIGIN}{path}", "time": start + offset * MINUTE_MS, "referrer": "", "width": 1280}
        assert beacon(client, key, body, agent=f"{CHROME} {who}", origin=ORIGIN).json_body["counted"]
    Counting(client, aws).process()
    today = summary(client, tz=zone, window="today", compare="previous_period")
    assert today["tz"] == zone and today["start"] == "2026-11-18T00:00:00" + (
        "+05:30" if midnight == "18:30" else "+05:45"
    )
    assert (today["pageviews"], today["visitors"], today["visitors_exact"]) == (3, 3, True)
    assert {p["path"]: p["pageviews"] for p in today["pages"]} == {"/new": 2, "/x": 1}
    # yesterday up to the same local time (00:40): nothing yet
    assert (today["previous"]["pageviews"], today["previous"]["visitors"]) == (0, 0)
    yesterday = summary(client, tz=zone, window="yesterday")
    assert (yesterday["pageviews"], yesterday["visitors"]) == (2, 2)
    assert yesterday["pages"] == [{"path": "/old", "pageviews": 2}]
    # the same day in UTC: all five page views, four visitors
    utc = summary(client, window="today")
    assert (utc["pageviews"], utc["visitors"]) == (5, 4) and "tz" not in utc


def test_given_a_site_without_zone_when_summarised_then_utc_and_a_bad_zone_is_400(
    client: Any, aws: Any, clock: Any
) -> None:
    answer = summary(client, window="today")
    assert answer["start"].endswith("Z") and answer["start"][11:19] == "00:00:00"
    response = client.http.get(f"/sites/{SITE}/summary?{urlencode({'window': 'today', 'tz': 'Asia/Calcutta '})}")
    assert response.status_code == 400 and response.json_body["Code"] == "BadRequestError"


def test_given_a_site_with_its_own_zone_when_summarised_without_tz_then_in_that_zone_and_tz_overrides_it(
    client: Any, aws: Any, clock: Any, key: str
) -> None:
    clock.now = times.parse("2026-11-17T19:10:00Z")  # 00:40 on 18 November in Kolkata
    body = {"url": f"{ORIGIN}/late", "time": times.parse("2026-11-17T18:20:00Z"), "referrer": "", "width": 1280}
    assert beacon(client, key, body, origin=ORIGIN).json_body["counted"]  # 23:50 in Kolkata, the day before
    Counting(client, aws).process()
    assert summary(client, window="today")["pageviews"] == 1  # UTC: the 17th
    response = client.http.put(
        f"/sites/{SITE}", headers={"Content-Type": "application/json"}, body='{"timezone": "Asia/Kolkata"}'
    )
    assert response.status_code == 200, response.body
    local = summary(client, window="today")
    assert (local["tz"], local["start"], local["pageviews"]) == ("Asia/Kolkata", "2026-11-18T00:00:00+05:30", 0)
    assert summary(client, window="today", tz="UTC")["pageviews"] == 1
