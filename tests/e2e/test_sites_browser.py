"""The dashboard's Sites tab in headless chromium against the local stack: a site with a time
zone and goals, page views and a custom event sent as tally.js sends them, then the tab shows
the visitors right now (and a new one within its refresh), the zone picker on the site's zone
(the browser's for a key that cannot read the settings), the goals table as the summary answers
it, the comparison toggle asking for the previous period, and the settings form saving a goal.

Also measured here: how soon a page view reaches `GET /sites/{site}/realtime` on this stack (the
visitors through the unique-count queue, the page views per minute through the events stream),
printed with `-s`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.stack import LocalStack, running_stack, wait_for
from tests.e2e.test_dashboard_browser import CHROMIUM, FLAGS, browser_or_skip

pytestmark = pytest.mark.e2e
SITE = "goals.e2e"
ORIGIN = "https://goals.e2e"
AGENTS = [f"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/{n}.0" for n in (126, 127, 128)]
GOALS = [{"name": "Signup", "event": "signup"}, {"name": "Pricing", "page": "/pricing"}]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    browser_or_skip()
    with running_stack(tmp_path_factory.mktemp("sites-stack")) as running:
        yield running


def beacon(stack: LocalStack, key: str, agent: str, path: str, event: str | None = None) -> None:
    body: dict[str, Any] = {"url": f"{ORIGIN}{path}", "time": int(time.time() * 1000), "referrer": "", "width": 1280}
    if event:
        body["event"] = event
    answer = stack.post(
        f"/beacon/pageview?key={key}",
        key=None,
        data=json.dumps(body),
        headers={"User-Agent": agent, "Origin": ORIGIN, "Content-Type": "text/plain;charset=UTF-8"},
    )
    assert answer.status_code == 202 and answer.json()["counted"], answer.text


def realtime(stack: LocalStack) -> dict[str, Any]:
    answer = stack.get(f"/sites/{SITE}/realtime")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def summary(stack: LocalStack) -> dict[str, Any]:
    answer = stack.get(f"/sites/{SITE}/summary", params={"window": "1h"})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def test_given_a_site_with_a_zone_and_goals_when_its_tab_is_opened_then_now_goals_zone_and_comparison_show(
    stack: LocalStack,
) -> None:
    sync_playwright = browser_or_skip()
    put = stack.request("PUT", f"/sites/{SITE}", json={"timezone": "Asia/Kathmandu", "goals": GOALS})
    assert put.status_code == 200, put.text
    made = stack.post("/keys", json={"scopes": ["ingest"], "origins": [ORIGIN], "note": "sites e2e"})
    key = str(made.json()["key"])
    reader = str(stack.post("/keys", json={"scopes": ["read"], "note": "sites e2e reader"}).json()["key"])

    sent = time.monotonic()
    beacon(stack, key, AGENTS[0], "/")
    beacon(stack, key, AGENTS[0], "/pricing")
    beacon(stack, key, AGENTS[0], "/pricing")  # the same visitor converts twice
    beacon(stack, key, AGENTS[0], "/", event="signup")
    beacon(stack, key, AGENTS[1], "/docs")
    answered = time.monotonic()
    # Noted by the unique-count handler's next batch (its batching window, at most 5 s locally).
    wait_for(lambda: realtime(stack), 60, "the visitors now", until=lambda r: r["visitors"] == 2)
    visitors_after = time.monotonic() - answered
    wait_for(
        lambda: realtime(stack),
        60,
        "the page views per minute",
        until=lambda r: sum(p["pageviews"] for p in r["pageviews"]) == 4,
    )
    pageviews_after = time.monotonic() - sent
    print(
        f"\nrealtime: visitors {visitors_after:.2f} s after the beacons answered, page views {pageviews_after:.2f} s after the first was sent"
    )
    stack.settled()
    expected = summary(stack)
    goals = {g["name"]: g for g in expected["goals"]}
    assert (goals["Pricing"]["conversions"], goals["Pricing"]["visitors"]) == (2, 1)
    assert (goals["Signup"]["conversions"], goals["Signup"]["visitors"]) == (1, 1)
    assert goals["Pricing"]["conversion_rate"] == 0.5

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            errors: list[str] = []
            context = browser.new_context(timezone_id="America/New_York")
            page = context.new_page()
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            asked: list[str] = []
            page.on("request", lambda r: asked.append(r.url) if "/summary?" in r.url else None)
            page.goto(f"{stack.url}/#key={stack.admin_key}")
            page.select_option("#window", "1h")
            page.get_by_role("tab", name="Sites").click()
            page.select_option("#site-select", SITE)
            page.wait_for_function(
                "() => document.getElementById('site-title').textContent === 'goals.e2e'"
                " && document.getElementById('site-now-visitors').textContent === '2'"
                " && document.querySelectorAll('#site-goals tbody tr').length === 2"
            )
            assert page.input_value("#site-zone") == "Asia/Kathmandu"  # the site's zone
            assert "tz=Asia%2FKathmandu" in asked[-1], asked
            rows = page.locator("#site-goals tbody tr")
            shown = [[rows.nth(i).locator("td").nth(c).inner_text() for c in range(5)] for i in range(rows.count())]
            assert shown == [
                ["Signup", "event signup", "1", "1", "50.0%"],
                ["Pricing", "page /pricing", "2", "1", "50.0%"],
            ]
            assert page.inner_text("#settings-zone") == "Asia/Kathmandu"
            page.wait_for_function("() => document.getElementById('site-chart').dataset.zone === 'Asia/Kathmandu'")

            # The comparison toggle asks for the previous period, and the change it answers shows.
            with page.expect_response(lambda r: "compare=previous_period" in r.url) as compared:
                page.check("#site-compare")
            assert "previous" in compared.value.json()
            page.wait_for_function("() => document.getElementById('site-pageviews-change').textContent !== ''")

            # Another zone picked here: the summary is asked in it, and the chart reads that zone.
            with page.expect_request(lambda r: "/summary?" in r.url and "tz=Europe%2FBerlin" in r.url):
                page.select_option("#site-zone", "Europe/Berlin")
            page.wait_for_function("() => document.getElementById('site-chart').dataset.zone === 'Europe/Berlin'")

            # A new visitor shows in the realtime number within its refresh, without a reload.
            beacon(stack, key, AGENTS[2], "/")
            page.wait_for_function(
                "() => document.getElementById('site-now-visitors').textContent === '3'", timeout=25_000
            )

            # The settings form: a goal added and saved is stored.
            page.click("#settings-add-goal")
            last = page.locator("#settings-goals tbody tr").last
            last.locator("input").nth(0).fill("Docs")
            last.locator("select").select_option("page")
            last.locator("input").nth(1).fill("/docs")
            page.click("#settings-save")
            page.wait_for_function("() => document.getElementById('settings-message').textContent === 'Saved.'")
            stored = stack.get(f"/sites/{SITE}").json()
            assert [(g["name"], g.get("event"), g.get("page")) for g in stored["goals"]] == [
                ("Signup", "signup", None), ("Pricing", None, "/pricing"), ("Docs", None, "/docs")
            ]  # fmt: skip
            assert stored["timezone"] == "Asia/Kathmandu"
            page.wait_for_function("() => document.querySelectorAll('#site-goals tbody tr').length === 3")
            assert errors == []

            # A read key cannot read the settings: the form is hidden, the zone is the browser's.
            reading = browser.new_context(timezone_id="America/New_York").new_page()
            reading.on("pageerror", lambda exc: errors.append(str(exc)))
            reading.goto(f"{stack.url}/#key={reader}")
            reading.get_by_role("tab", name="Sites").click()
            reading.select_option("#site-select", SITE)
            reading.wait_for_function("() => document.getElementById('site-now-visitors').textContent === '3'")
            assert reading.input_value("#site-zone") == "America/New_York"
            assert reading.locator("#site-settings").is_hidden()
            assert reading.locator("#key-panel").is_hidden()  # a refused settings read asks for no other key
            assert errors == []
        finally:
            browser.close()
