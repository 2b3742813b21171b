"""The dashboard in real headless browsers (Debian's chromium, and firefox-esr over WebDriver
BiDi) against the local stack.

Data goes in through the API; the page must show it: the counters sent, a chart with as many
points as the API's histogram and the window's total, the views, the reports with CSV
downloads equal to the API's, the quarantine per source, and no errors in the console.
Screenshots of every view are saved under build/dashboard/ (not committed).

Skipped, saying why, only when a browser (or playwright) is missing outside CI; in CI (CI=true)
a missing browser fails.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
import requests

from tests.e2e import bidi
from tests.e2e.stack import PROJECT, LocalStack, running_stack, wait_for

pytestmark = pytest.mark.e2e
CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SHOTS = PROJECT / "build" / "dashboard"
MINUTE = 60_000
# Routes another part of the API may not have yet: the page says so instead of failing, and
# the browser logs the 400/404 it got as a console error, which is expected here.
OPTIONAL_ROUTES = re.compile(r"/hyperloglog($|\?|/[^/?]+/histogram)")


def browser_or_skip() -> Any:
    missing = None
    if not CHROMIUM.exists():
        missing = f"Debian's chromium is not installed at {CHROMIUM} (apt-get install chromium)"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "the playwright package is not installed (requirements-dev.txt)"
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser tests must run in CI: {missing}; .ci/run installs it")
        pytest.skip(f"browser tests skipped: {missing}")
    return sync_playwright


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    # Its own stack: the page must list exactly this test's counters and report. Settle 0: a
    # report run right after posting covers the events.
    browser_or_skip()
    with running_stack(tmp_path_factory.mktemp("dashboard-stack"), REPORT_SETTLE_SECONDS="0") as running:
        yield running


@pytest.fixture(scope="module")
def api(stack: LocalStack) -> requests.Session:
    session = requests.Session()
    key = getattr(stack, "admin_key", None)
    if key:
        session.headers["Authorization"] = f"Bearer {key}"
    return session


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    sync_playwright = browser_or_skip()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),  # a fresh user data dir
            executable_path=str(CHROMIUM),
            headless=True,
            args=FLAGS,
            accept_downloads=True,
            viewport={"width": 1100, "height": 760},
        )
        try:
            yield browser
        finally:
            browser.close()


class Console:
    """Errors the page logs or throws, except the optional routes' expected 400/404."""

    def __init__(self, page: Any) -> None:
        self.errors: list[str] = []
        page.on("console", self._message)
        page.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))

    def _message(self, message: Any) -> None:
        if message.type != "error":
            return
        where = (message.location or {}).get("url", "")
        if "Failed to load resource" in message.text and OPTIONAL_ROUTES.search(where):
            return
        self.errors.append(f"{message.text} ({where})")


def page_url(stack: LocalStack) -> str:
    key = getattr(stack, "admin_key", None)
    return f"{stack.url}/" + (f"#key={key}" if key else "")


def post(api: requests.Session, url: str, body: Any, status: int) -> Any:
    response = api.post(url, json=body, timeout=10)
    assert response.status_code == status, response.text
    return response.json()


@pytest.fixture(scope="module")
def loaded(stack: LocalStack, api: requests.Session) -> dict[str, Any]:
    """Events, views and unique items sent through the API, counted, and one report run."""
    now = int(time.time() * 1000)
    sent = {
        "dash.signups": [now - k * 7 * MINUTE for k in range(5)],  # all within the last hour
        "dash.orders": [now - 2 * MINUTE, now - 90 * MINUTE],
        "dash.refunds": [now - 3 * 60 * MINUTE],  # none in the last hour
        "dash:jobs": [now - k * MINUTE for k in range(1, 4)],  # with dimensions and values
    }
    events = [
        {"counter": c, "time": t, "attributes": {"amount": 2}}
        for c, times in sent.items()
        for t in times
        if c != "dash:jobs"
    ]
    events += [
        {"counter": "dash:jobs", "time": t, "dimensions": {"provider": p}, "values": {"price": 1.5}}
        for t, p in zip(sent["dash:jobs"], ["p1", "p2", "p1"])
    ]
    post(api, f"{stack.url}/events", {"events": events}, 201)
    views = {"https://shop.example/a": 3, "https://shop.example/b?x=1&y=2": 1}
    post(
        api,
        f"{stack.url}/views",
        {
            "views": [
                {"url": u, "time": now - k * 1000, "clientId": f"c{k}"} for u, n in views.items() for k in range(n)
            ]
        },
        202,
    )
    post(api, f"{stack.url}/hyperloglog/dash.visitors", {"data": [f"v{i}" for i in range(40)]}, 202)

    def counted() -> bool:
        for counter, times in sent.items():
            body = api.get(f"{stack.url}/counters/{counter}", params={"window": "24h"}, timeout=5).json()
            if body["count"] != len(times):
                return False
        # The 40 items travel in one message, so they are merged at once.
        if api.get(f"{stack.url}/hyperloglog/dash.visitors", timeout=5).json()["cardinality"] == 0:
            return False
        listed = api.get(f"{stack.url}/views/urls", timeout=5).json()["urls"]
        top = api.get(f"{stack.url}/views/top", params={"window": "24h"}, timeout=5).json()["urls"]
        return {u["url"]: u["views"] for u in listed} == views == {u["url"]: u["views"] for u in top}

    wait_for(counted, 120, "events and views to be counted")
    post(api, f"{stack.url}/reports", {}, 201)
    (report,) = api.get(f"{stack.url}/reports", timeout=5).json()["reports"]
    return {"sent": sent, "views": views, "report": report}


def shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def open_tab(page: Any, name: str) -> None:
    page.get_by_role("tab", name=name).click()


def test_given_data_sent_through_the_api_when_the_dashboard_is_opened_then_every_view_shows_it(
    stack: LocalStack, api: requests.Session, context: Any, loaded: dict[str, Any]
) -> None:
    page = context.new_page()
    console = Console(page)
    page.goto(page_url(stack))
    assert "#key=" not in page.url  # the key does not stay in the address bar

    # Counters: the list shows exactly the counters sent.
    rows = page.locator("#counter-list tbody tr")
    rows.first.wait_for()
    assert sorted(rows.locator("button").all_inner_texts()) == sorted(loaded["sent"])

    # A chart for the last 24 h: the histogram's points and the window's total.
    chart = page.locator("#counter-chart")
    for window, counter in (("24h", "dash.signups"), ("1h", "dash.orders"), ("7d", "dash.signups")):
        page.select_option("#window", window)
        page.get_by_role("button", name=counter, exact=True).click()
        page.wait_for_function(
            "([w, c]) => { const el = document.getElementById('counter-chart');"
            " return el.dataset.window === w && el.dataset.counter === c"
            " && document.getElementById('counter-title').textContent === c"
            " && el.querySelector('canvas') !== null; }",
            arg=[window, counter],
        )
        params = {
            "window": window,
            "end": chart.get_attribute("data-end"),
            "resolution": chart.get_attribute("data-resolution"),
        }
        histogram = api.get(f"{stack.url}/counters/{counter}/histogram", params=params, timeout=5).json()
        cutoff = int(params["end"]) - {"24h": 1440, "1h": 60, "7d": 7 * 1440}[window] * MINUTE
        expected_total = sum(1 for t in loaded["sent"][counter] if t // MINUTE > cutoff // MINUTE)
        assert int(chart.get_attribute("data-points")) == len(histogram["buckets"])
        assert int(chart.get_attribute("data-total")) == expected_total
        assert page.locator("#counter-total").inner_text().startswith(f"{expected_total} events in the last")
        shot(page, f"counters-{window}")

    # No events in the window: said plainly, no chart.
    page.select_option("#window", "1h")
    page.get_by_role("button", name="dash.refunds", exact=True).click()
    empty = page.locator("#counter-empty")
    empty.wait_for(state="visible")
    assert empty.inner_text() == "No events for this counter in the last 1 h."
    assert page.locator("#counter-chart canvas").count() == 0
    page.select_option("#window", "24h")

    # Unique counts: the names listing (or, without it, a clear message), and one name.
    open_tab(page, "Unique counts")
    page.fill("#unique-name", "dash.visitors")
    page.get_by_role("button", name="Show").click()
    page.wait_for_function("() => document.getElementById('unique-total').textContent.includes('about')")
    cardinality = api.get(f"{stack.url}/hyperloglog/dash.visitors", timeout=5).json()["cardinality"]
    assert f"about {round(cardinality)} different" in page.locator("#unique-total").inner_text()
    assert page.locator("#uniques-message").inner_text() or page.locator("#unique-list tbody tr").count() > 0
    page.wait_for_function(
        "() => document.getElementById('unique-empty').textContent !== ''"
        " || document.querySelector('#unique-chart canvas') !== null"
    )
    shot(page, "uniques")

    # Views: every URL with its count, most viewed first.
    open_tab(page, "Views")
    page.locator("#view-list tbody tr").first.wait_for()
    cells = page.locator("#view-list tbody tr").evaluate_all(
        "rows => rows.map(r => [r.cells[0].textContent, r.cells[1].textContent])"
    )
    assert cells == sorted(([u, str(n)] for u, n in loaded["views"].items()), key=lambda c: -int(c[1]))
    shot(page, "views")

    # Reports: the newest report, and its CSV link downloads what the API serves.
    open_tab(page, "Reports")
    report = loaded["report"]
    row = page.locator(f'#report-list tbody tr[data-id="{report["id"]}"]')
    row.wait_for()
    assert row.locator("td").nth(2).inner_text() == str(report["events"])
    with page.expect_download() as download_info:
        row.get_by_role("link", name=re.compile("^CSV")).click()
    download = download_info.value
    assert download.suggested_filename == f"{report['id']}.csv"
    served = api.get(f"{stack.url}/reports/{report['id']}.csv", timeout=5)
    assert served.headers["Content-Type"].startswith("text/csv")
    assert Path(download.path()).read_bytes() == served.content
    assert served.text.startswith("counter,events,amount\r\n") and "dash.signups,5,10\r\n" in served.text
    with page.expect_download() as json_info:
        row.get_by_role("link", name=re.compile("^JSON")).click()
    assert json_info.value.suggested_filename == f"{report['id']}.json"
    shot(page, "reports")

    # Quarantine: one row per source.
    open_tab(page, "Quarantine")
    page.locator("#quarantine-list tbody tr").first.wait_for()
    sources = page.locator("#quarantine-list tbody tr td:first-child").all_inner_texts()
    assert sources == ["events-stream", "uniques-queue", "views-dead-letter-queue"]
    shot(page, "quarantine")

    assert page.locator("#key-panel").is_hidden()  # nothing asked for a key it does not need
    assert console.errors == []


def test_given_a_fresh_page_when_opened_then_a_chart_then_a_breakdown_and_top_urls_and_a_copied_url_reopens_the_view(
    stack: LocalStack, api: requests.Session, context: Any, loaded: dict[str, Any]
) -> None:
    page = context.new_page()
    console = Console(page)
    page.goto(page_url(stack))

    # It opens on something to look at: the chart of the busiest counter of the window.
    page.wait_for_function(
        "() => document.getElementById('counter-chart').dataset.counter === 'dash.signups'"
        " && document.querySelector('#counter-chart canvas') !== null"
    )
    assert page.locator("#counter-title").inner_text() == "dash.signups"
    assert "counter=dash.signups" in page.url
    shot(page, "opened")

    # A counter's breakdown by a dimension its events carry: the API's values and counts.
    page.get_by_role("button", name="dash:jobs", exact=True).click()
    page.fill("#breakdown-by", "provider")
    page.get_by_role("button", name="Break down").click()
    rows = page.locator('#breakdown-tables table[data-by="provider"] tbody tr')
    rows.first.wait_for()
    shown = rows.evaluate_all("rows => rows.map(r => [r.cells[0].textContent, r.cells[1].textContent])")
    answer = api.get(f"{stack.url}/counters/dash:jobs/breakdown", params={"by": "provider", "window": "24h"}).json()
    assert shown == [[v["value"], str(v["count"])] for v in answer["values"]] == [["p1", "2"], ["p2", "1"]]
    assert "price 3" in rows.first.inner_text()  # the exact sum of the values
    shot(page, "breakdown")

    # The Views tab follows the window: the top URLs of the last 7 days, and one URL's series.
    page.select_option("#window", "7d")
    open_tab(page, "Views")
    page.wait_for_function("() => document.getElementById('view-list').dataset.window === '7d'")
    cells = page.locator("#view-list tbody tr").evaluate_all(
        "rows => rows.map(r => [r.cells[0].textContent, r.cells[1].textContent])"
    )
    top = api.get(f"{stack.url}/views/top", params={"window": "7d"}).json()
    assert cells == [[u["url"], str(u["views"])] for u in top["urls"]]
    assert [c[0] for c in cells] == ["https://shop.example/a", "https://shop.example/b?x=1&y=2"]
    page.get_by_role("button", name="https://shop.example/a", exact=True).click()
    page.wait_for_function(
        "() => { const el = document.getElementById('view-chart');"
        " return el.dataset.url === 'https://shop.example/a' && el.dataset.window === '7d'"
        " && el.querySelector('canvas') !== null; }"
    )
    assert page.locator("#view-chart").get_attribute("data-total") == "3"
    shot(page, "views-top")

    # A copied URL reopens the same view: tab, window, URL, and the counter with its dimension.
    copied = page.url
    for part in ("view=views", "window=7d", "counter=dash:jobs", "by=provider", "url="):
        assert part in unquote(copied), (part, copied)
    again = context.new_page()
    again_console = Console(again)
    key = getattr(stack, "admin_key", None)
    again.goto(copied + (f"&key={key}" if key else ""))  # a new tab has no key yet: the link carries it
    again.wait_for_function(
        "() => document.getElementById('tab-views').getAttribute('aria-selected') === 'true'"
        " && document.getElementById('window').value === '7d'"
        " && document.getElementById('view-chart').dataset.url === 'https://shop.example/a'"
        " && document.querySelector('#view-chart canvas') !== null"
        " && document.getElementById('counter-chart').dataset.counter === 'dash:jobs'"
        " && document.querySelector('#breakdown-tables table[data-by=\"provider\"] tbody tr') !== null"
    )
    assert "key=" not in again.url
    assert again.locator("#view-chart").get_attribute("data-total") == "3"
    again.get_by_role("tab", name="Counters").click()
    assert again.locator('#breakdown-tables table[data-by="provider"]').is_visible()
    shot(again, "reopened")
    assert console.errors == [] and again_console.errors == []


def test_given_a_keyboard_only_when_moving_through_tabs_then_each_view_is_reached(
    stack: LocalStack, context: Any, loaded: dict[str, Any]
) -> None:
    page = context.new_page()
    console = Console(page)
    page.goto(page_url(stack))
    page.locator("#counter-list tbody tr").first.wait_for()
    page.get_by_role("tab", name="Counters").focus()
    for name in ("Unique counts", "Views", "Reports", "Quarantine", "Sites", "Counters"):
        page.keyboard.press("ArrowRight")
        assert page.evaluate("document.activeElement.textContent") == name
        assert page.get_by_role("tab", name=name).get_attribute("aria-selected") == "true"
    # Tab from the tabs into the list, Enter on a counter draws it.
    page.locator("#counter-list tbody button").first.focus()
    page.keyboard.press("Enter")
    page.locator("#counter-chart canvas").wait_for()
    assert console.errors == []


def test_given_a_phone_screen_when_opened_then_nothing_overflows_sideways(
    stack: LocalStack, context: Any, loaded: dict[str, Any]
) -> None:
    page = context.new_page()
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(page_url(stack))
    page.locator("#counter-list tbody tr").first.wait_for()
    page.get_by_role("button", name="dash.signups", exact=True).click()
    page.locator("#counter-chart canvas").wait_for()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shot(page, "phone")


def test_given_an_api_that_needs_a_key_when_opened_then_the_page_asks_keeps_it_for_the_tab_and_sends_it(
    stack: LocalStack, context: Any, loaded: dict[str, Any]
) -> None:
    """The stack's own access control: a wrong key is refused, the page asks, the right one works."""
    page = context.new_page()
    console = Console(page)
    seen: list[str | None] = []
    api = re.compile(r"/(counters|hyperloglog|views|reports|quarantine)")
    page.on(
        "request",
        lambda request: seen.append(request.headers.get("authorization")) if api.search(request.url) else None,
    )
    page.goto(f"{stack.url}/#key=tly_wrong-key")
    panel = page.locator("#key-panel")
    panel.wait_for(state="visible")
    assert "refused the key" in page.locator("#key-reason").inner_text()
    assert seen and seen[0] == "Bearer tly_wrong-key"
    page.fill("#key-input", stack.admin_key)
    page.keyboard.press("Enter")
    page.locator("#counter-list tbody tr").first.wait_for()
    assert panel.is_hidden()
    assert page.evaluate("sessionStorage.getItem('tally.apiKey')") == stack.admin_key
    assert seen[-1] == f"Bearer {stack.admin_key}"
    # The page and its assets need no key; only the refused API calls were logged.
    assert all("status of 401" in e for e in console.errors), console.errors


# -- Firefox ------------------------------------------------------------------------------------


def firefox_or_skip() -> None:
    missing = None
    if not bidi.FIREFOX.exists():
        missing = f"Debian's firefox-esr is not installed at {bidi.FIREFOX} (apt-get install firefox-esr)"
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser tests must run in CI: {missing}; .ci/run installs it")
        pytest.skip(f"Firefox tests skipped: {missing}")


ARROW_RIGHT, ENTER = "\ue014", "\ue007"


def click(expression: str) -> str:
    """A script that clicks the element `expression` finds, true when it found one."""
    return f"(() => {{ const el = {expression}; if (!el) return false; el.click(); return true; }})()"


def button(name: str) -> str:
    return f"[...document.querySelectorAll('button')].find(b => b.textContent === {name!r})"


def test_given_firefox_when_the_dashboard_is_used_then_it_shows_the_data_by_mouse_keyboard_and_on_a_phone(
    stack: LocalStack, api: requests.Session, loaded: dict[str, Any], tmp_path: Path
) -> None:
    firefox_or_skip()
    with bidi.firefox(tmp_path / "firefox-profile") as page:
        page.navigate(page_url(stack))
        assert "Firefox/" in page.version()
        listed = page.wait_until(
            "[...document.querySelectorAll('#counter-list tbody button')].map(b => b.textContent)",
            "the counter list",
        )
        assert sorted(listed) == sorted(loaded["sent"])

        # A chart of one counter over 24 h: as many points as the API's histogram, the right total.
        assert page.evaluate(click(button("dash.signups")))
        chart = page.wait_until(
            "(() => { const el = document.getElementById('counter-chart');"
            " return el.dataset.counter === 'dash.signups' && el.querySelector('canvas')"
            " && {...el.dataset}; })()",
            "the dash.signups chart",
        )
        params = {"window": "24h", "end": chart["end"], "resolution": chart["resolution"]}
        histogram = api.get(f"{stack.url}/counters/dash.signups/histogram", params=params, timeout=5).json()
        cutoff = int(chart["end"]) - 1440 * MINUTE
        assert int(chart["points"]) == len(histogram["buckets"])
        assert int(chart["total"]) == sum(1 for t in loaded["sent"]["dash.signups"] if t // MINUTE > cutoff // MINUTE)
        page.screenshot(SHOTS / "firefox-counters.png")

        # The keyboard alone: arrows move through the tabs, Enter on a URL's row is reachable.
        page.evaluate("document.querySelector('[role=tab]').focus()")
        for name in ("Unique counts", "Views"):
            page.press(ARROW_RIGHT)
            assert page.evaluate("document.activeElement.textContent") == name
            assert page.evaluate("document.activeElement.getAttribute('aria-selected')") == "true"
        cells = page.wait_until(
            "[...document.querySelectorAll('#view-list tbody tr')]"
            ".map(r => [r.cells[0].textContent, r.cells[1].textContent])",
            "the view list",
        )
        assert cells == sorted(([u, str(n)] for u, n in loaded["views"].items()), key=lambda c: -int(c[1]))
        page.screenshot(SHOTS / "firefox-views.png")

        # Reports: the newest one with its CSV link.
        page.evaluate(click("[...document.querySelectorAll('[role=tab]')].find(t => t.textContent === 'Reports')"))
        report = loaded["report"]
        link = page.wait_until(
            f'document.querySelector(\'#report-list tbody tr[data-id="{report["id"]}"] a[href$=".csv"]\')?.href',
            "the report's CSV link",
        )
        served = api.get(link, timeout=5)
        assert served.status_code == 200 and served.headers["Content-Type"].startswith("text/csv")

        # A phone's width: nothing overflows sideways.
        page.set_viewport(390, 844)
        page.evaluate(click("[...document.querySelectorAll('[role=tab]')].find(t => t.textContent === 'Counters')"))
        page.wait_until("document.querySelector('#counter-chart canvas') !== null", "the chart on a phone")
        # Resized while its tab was hidden, the chart fits again once shown (after a layout pass).
        page.wait_until("document.documentElement.scrollWidth <= 390", "nothing to overflow a phone's width", 5)
        page.screenshot(SHOTS / "firefox-phone.png")

        assert page.page_errors() == []


def test_given_a_zone_and_the_comparison_when_a_counter_is_shown_then_its_reads_carry_them_and_the_change_shows(
    stack: LocalStack, api: requests.Session, context: Any, loaded: dict[str, Any]
) -> None:
    # Two events in the last hour and one in the hour before: +100% against the previous period.
    now = int(time.time() * 1000)
    times = [now - 5 * MINUTE, now - 10 * MINUTE, now - 75 * MINUTE]
    post(api, f"{stack.url}/events", {"events": [{"counter": "dash.zoned", "time": t} for t in times]}, 201)
    wait_for(
        lambda: api.get(f"{stack.url}/counters/dash.zoned", params={"window": "24h"}, timeout=5).json()["count"] == 3,
        120,
        "dash.zoned to be counted",
    )
    page = context.new_page()
    console = Console(page)
    page.goto(page_url(stack))
    page.locator("#counter-list tbody tr").first.wait_for()
    page.select_option("#window", "1h")
    page.select_option("#zone", "Australia/Adelaide")  # +09:30 or +10:30: its hours are not UTC's
    page.get_by_role("button", name="dash.zoned", exact=True).click()
    page.wait_for_function("() => document.getElementById('counter-chart').dataset.counter === 'dash.zoned'")

    zone = "tz=Australia%2FAdelaide"
    with page.expect_request(lambda r: "/counters/dash.zoned?" in r.url and "compare=previous_period" in r.url) as req:
        page.check("#compare")
    assert zone in req.value.url
    page.wait_for_function(
        "() => document.getElementById('counter-change').textContent !== ''"
        " && document.querySelector('#counter-chart canvas') !== null"
    )
    chart = page.locator("#counter-chart")
    assert chart.get_attribute("data-zone") == "Australia/Adelaide"
    params = {"window": "1h", "end": chart.get_attribute("data-end"), "tz": "Australia/Adelaide"}
    answer = api.get(f"{stack.url}/counters/dash.zoned", params={**params, "compare": "previous_period"}).json()
    assert (answer["count"], answer["previous"]["count"]) == (2, 1)
    assert page.locator("#counter-total").inner_text().startswith("2 events in the last 1 h")
    assert page.locator("#counter-change").inner_text() == "+100% vs previous (1)"
    # The chart is the zone's histogram: its buckets labelled in the zone's offset.
    histogram = api.get(f"{stack.url}/counters/dash.zoned/histogram", params={**params, "resolution": "minute"}).json()
    assert {b["start"][-6:] for b in histogram["buckets"]} <= {"+09:30", "+10:30"}
    assert int(chart.get_attribute("data-points")) == len(histogram["buckets"])
    assert zone in page.url and "compare=previous_period" in page.url
    shot(page, "counters-zone-compare")

    # Unticked, the total stands alone again.
    page.uncheck("#compare")
    page.wait_for_function("() => document.getElementById('counter-total').textContent.startsWith('2 events')")
    assert page.locator("#counter-change").inner_text() == ""
    assert console.errors == []
