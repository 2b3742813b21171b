"""The tracker in real headless browsers (Debian's chromium over Playwright, firefox-esr over
WebDriver BiDi): a small site (static pages and a single-page app) served from a second local
port, its pages carrying the tally.js snippet pointed at the local stack.

Two visitors (browser contexts with different user agents) visit pages and navigate inside the
app; the site's summary shows exactly the page views they made, per page, and two visitors;
a beacon the test sends again (the same body, the same browser) counts once.

Skipped, saying why, only when a browser is missing outside CI (as the dashboard's tests)."""

from __future__ import annotations

import collections
import contextlib
import functools
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.e2e import bidi
from tests.e2e.stack import LocalStack, free_port, running_stack, wait_for
from tests.e2e.test_dashboard_browser import CHROMIUM, FLAGS, browser_or_skip, firefox_or_skip

pytestmark = pytest.mark.e2e
AGENTS = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
)
FIREFOX_AGENTS = (
    "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0",
)
# The site's pages record the beacons tally.js hands to fetch (the test's own hook, not the
# tracker's): the test sends one of them again.
RECORD = (
    "<script>window.sent = []; const send = window.fetch.bind(window);"
    " window.fetch = (url, init) => { if (String(url).includes('/beacon/')) window.sent.push([String(url), init.body]);"
    " return send(url, init); };</script>"
)
APP = """<script>
function go(path) { history.pushState({}, "", path); document.getElementById("where").textContent = path; }
</script>
<p id="where">/app.html</p>
<button id="settings" onclick="go('/app/settings')">Settings</button>
<button id="profile" onclick="go('/app/profile')">Profile</button>
"""


def site_files(root: Path, api: str, key: str, site: str) -> None:
    snippet = f'<script defer src="{api}/tally.js" data-key="{key}" data-site="{site}" data-allow-local></script>'
    pages = {
        "index.html": '<h1>Home</h1><a id="about" href="/about.html">About</a> <a id="app" href="/app.html">App</a>',
        "about.html": '<h1>About</h1><a id="home" href="/index.html">Home</a>',
        "app.html": APP,
    }
    for name, body in pages.items():
        (root / name).write_text(f"<!doctype html><html><head>{RECORD}{snippet}</head><body>{body}</body></html>")


@contextlib.contextmanager
def serving(root: Path) -> Iterator[str]:
    """The site, from a second local port (its own origin)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with running_stack(tmp_path_factory.mktemp("tracker-stack")) as running:
        yield running


def counted_as(origin: str) -> str:
    """The origin as a page's URL is sent and counted: without its port."""
    return origin.rsplit(":", 1)[0]


def ingest_key(stack: LocalStack, origin: str) -> str:
    """An ingest key limited to `origin`: it may count the served pages under another `data-site`
    (each browser's own, so the tests' counts do not mix), which a tracker key refuses."""
    answer = stack.post("/keys", json={"scopes": ["ingest"], "origins": [origin], "note": "tracker e2e"})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["key"])


def tracker_key(stack: LocalStack, origin: str) -> str:
    """A tracker key for the site served at `origin` (its host: sites are matched by host)."""
    answer = stack.post(
        "/keys", json={"scopes": ["tracker"], "sites": [urlsplit(origin).hostname], "note": "tracker e2e"}
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["key"])


def summary(stack: LocalStack, site: str) -> dict[str, Any]:
    answer = stack.get(f"/sites/{site}/summary", params={"window": "1h", "limit": "50"})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def settled(stack: LocalStack, site: str, pageviews: int, visitors: int) -> dict[str, Any]:
    """The summary once it counts `pageviews` and `visitors`, and still does a few seconds later."""
    wait_for(
        lambda: summary(stack, site),
        120,
        f"{pageviews} page views and {visitors} visitors of {site}",
        until=lambda s: s["pageviews"] >= pageviews and s["visitors"] >= visitors,
    )
    stack.settled()  # every beacon's messages and records handled: a count now is final
    return summary(stack, site)


def resend(stack: LocalStack, url: str, body: str, agent: str, origin: str) -> None:
    """One beacon again, as the browser sent it (same body, user agent, origin, address)."""
    path = url.removeprefix(stack.url)
    answer = stack.post(path, key=None, data=body, headers={"User-Agent": agent, "Origin": origin,
                                                            "Content-Type": "text/plain;charset=UTF-8"})  # fmt: skip
    assert answer.status_code == 202 and answer.json()["counted"] is True, answer.text


def test_given_two_visitors_in_chromium_when_they_browse_the_site_and_its_app_then_the_summary_is_exact(
    stack: LocalStack, tmp_path: Path
) -> None:
    sync_playwright = browser_or_skip()
    site = "chromium.e2e"
    with serving(tmp_path) as origin:
        site_files(tmp_path, stack.url, ingest_key(stack, origin), site)
        made: collections.Counter[str] = collections.Counter()
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
            try:
                first = browser.new_context(user_agent=AGENTS[0], viewport={"width": 1280, "height": 800})
                page = first.new_page()
                page.goto(f"{origin}/index.html")
                made["/index.html"] += 1
                page.wait_for_function("window.sent.length === 1")
                again = page.evaluate("window.sent[0]")
                page.click("#about")
                page.wait_for_url("**/about.html")
                made["/about.html"] += 1
                page.wait_for_function("window.sent.length === 1")
                page.goto(f"{origin}/app.html")
                made["/app.html"] += 1
                page.click("#settings")
                made["/app/settings"] += 1
                page.click("#profile")
                made["/app/profile"] += 1
                page.go_back()  # popstate: back on /app/settings
                made["/app/settings"] += 1
                page.wait_for_function("window.sent.length === 4")
                sent_in_app = page.evaluate("window.sent.map(s => JSON.parse(s[1]).url)")
                assert [u.removeprefix(counted_as(origin)) for u in sent_in_app] == [
                    "/app.html", "/app/settings", "/app/profile", "/app/settings"
                ]  # fmt: skip
                page.click("#settings")  # the page it is on: not a new page view
                page.wait_for_timeout(300)
                assert page.evaluate("window.sent.length") == 4
                assert page.evaluate("document.cookie") == ""
                assert page.evaluate("localStorage.length + sessionStorage.length") == 0
                page.evaluate("tally('signup', {dimensions: {plan: 'pro'}, values: {amount: 12.5}})")
                page.wait_for_function("window.sent.length === 5")  # a custom event, not a page view

                second = browser.new_context(user_agent=AGENTS[1], viewport={"width": 390, "height": 844})
                other = second.new_page()
                other.goto(f"{origin}/index.html")
                made["/index.html"] += 1
                other.click("#app")
                other.wait_for_url("**/app.html")
                made["/app.html"] += 1
                other.click("#profile")
                made["/app/profile"] += 1
                other.wait_for_function("window.sent.length === 2")
            finally:
                browser.close()

        got = settled(stack, site, sum(made.values()), 2)
        assert got["pageviews"] == sum(made.values()) == 9
        assert got["visitors"] == 2
        assert {p["path"]: p["pageviews"] for p in got["pages"]} == dict(made)
        assert {d["device"]: d["pageviews"] for d in got["devices"]} == {"laptop": 6, "mobile": 3}

        resend(stack, again[0], again[1], AGENTS[0], origin)
        after = settled(stack, site, 9, 2)
        assert (after["pageviews"], after["visitors"]) == (9, 2)
        assert {p["path"]: p["pageviews"] for p in after["pages"]} == dict(made)
        views = stack.get("/views", params={"url": f"{counted_as(origin)}/index.html"}).json()
        assert views["views"] == 2
        signups = stack.get(f"/counters/site-event:{site}:signup", params={"window": "1h"}).json()
        assert (signups["count"], signups["sums"]) == (1, {"amount": 12.5})

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
            try:
                dashboard_shows(browser.new_page(), stack, site, after)
            finally:
                browser.close()


def tally_warnings(context: Any, url: str) -> list[str]:
    """The console messages starting "tally:" of one page load, once the first has come."""
    page = context.new_page()
    said: list[str] = []
    page.on("console", lambda m: said.append(f"{m.type}: {m.text}") if m.text.startswith("tally:") else None)
    with page.expect_console_message(lambda m: m.text.startswith("tally:"), timeout=15_000):
        page.goto(url)
    page.wait_for_timeout(500)  # a second warning would come by now
    page.close()
    return said


def test_given_skipped_pages_and_refused_beacons_in_chromium_when_loaded_then_one_tally_warning_says_why(
    stack: LocalStack, tmp_path: Path
) -> None:
    sync_playwright = browser_or_skip()
    with serving(tmp_path) as origin:
        key = tracker_key(stack, origin)
        elsewhere = tracker_key(stack, "https://elsewhere.example")
        pages = {
            "local.html": f'data-key="{key}"',  # served from 127.0.0.1 without data-allow-local
            "nokey.html": "data-allow-local",
            "unknown.html": 'data-key="not-a-key" data-allow-local',  # 401, CORS headers: the page reads it
            "foreign.html": f'data-key="{elsewhere}" data-allow-local',  # another site's key: 403
            "counted.html": f'data-key="{key}" data-allow-local data-hash',
        }
        for name, attributes in pages.items():
            snippet = f'<script defer src="{stack.url}/tally.js" {attributes}></script>'
            (tmp_path / name).write_text(f"<!doctype html><html><head>{RECORD}{snippet}</head><body></body></html>")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
            try:
                context = browser.new_context(user_agent=AGENTS[0])
                assert tally_warnings(context, f"{origin}/local.html") == [
                    "warning: tally: a local page (127.0.0.1) needs data-allow-local: not counted"
                ]
                assert tally_warnings(context, f"{origin}/nokey.html") == [
                    "warning: tally: the script tag has no data-key: not counted"
                ]
                assert tally_warnings(context, f"{origin}/unknown.html") == [
                    "warning: tally: the beacon was refused (HTTP 401): not counted"
                ]
                # The local stage answers CORS to every origin (CORS_ORIGINS "*"), so the page reads the 403.
                assert tally_warnings(context, f"{origin}/foreign.html") == [
                    "warning: tally: the beacon was refused (HTTP 403): not counted"
                ]
                # An answer the page may not read (a stage without CORS for it) or no answer at all.
                cut = browser.new_context(user_agent=AGENTS[0])
                cut.route("**/beacon/pageview*", lambda route: route.abort())
                assert tally_warnings(cut, f"{origin}/counted.html") == [
                    "warning: tally: the beacon was refused (no readable answer): not counted"
                ]
                opted_out = browser.new_context(user_agent=AGENTS[0])
                opted_out.add_init_script("localStorage.setItem('tally_ignore', 'true')")
                assert tally_warnings(opted_out, f"{origin}/counted.html") == [
                    "warning: tally: localStorage.tally_ignore is set: not counted"
                ]

                # Accepted: no warning, and the URL sent holds no port, query or route query but UTM fields.
                page = context.new_page()
                said: list[str] = []
                page.on("console", lambda m: said.append(m.text))
                page.goto(f"{origin}/counted.html?token=s3cret&utm_source=news#/reset?token=s3cret&email=a@b.example")
                page.wait_for_function("window.sent.length === 1")
                sent = json.loads(page.evaluate("window.sent[0][1]"))
                assert sent["url"] == f"{counted_as(origin)}/counted.html?utm_source=news#/reset"
                page.wait_for_timeout(500)
                assert [text for text in said if text.startswith("tally:")] == []
            finally:
                browser.close()
        # Counted with the tracker key, under the page's host (the site its key lists).
        counted = settled(stack, urlsplit(origin).hostname or "", 1, 1)
        assert (counted["pageviews"], counted["visitors"]) == (1, 1)


def dashboard_shows(page: Any, stack: LocalStack, site: str, expected: dict[str, Any]) -> None:
    """The dashboard's Sites tab: the site's visitors and page views, a chart, the top pages."""
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{stack.url}/#key={stack.admin_key}")
    page.select_option("#window", "1h")
    page.get_by_role("tab", name="Sites").click()
    page.select_option("#site-select", site)
    page.wait_for_function(
        "([s, v]) => document.getElementById('site-title').textContent === s"
        " && document.getElementById('site-pageviews').textContent === v"
        " && document.querySelector('#site-chart canvas') !== null",
        arg=[site, str(expected["pageviews"])],
    )
    assert page.inner_text("#site-visitors") == str(expected["visitors"])
    assert page.inner_text("#site-bots") == f"{expected['bots']} page views refused as bots"
    rows = page.locator("#site-pages tbody tr")
    shown = {rows.nth(i).locator("td").nth(0).inner_text(): int(rows.nth(i).locator("td").nth(1).inner_text())
             for i in range(rows.count())}  # fmt: skip
    assert shown == {p["path"]: p["pageviews"] for p in expected["pages"]}
    assert page.locator("#site-devices tbody tr").count() == len(expected["devices"])
    assert page.locator("#site-retained").is_hidden()  # the last hour: everything is kept
    # Seven days per hour: the visitors' hour sketches are kept as long as their days (400 days
    # on the dev stage), so the chart is drawn for the whole week and no note says otherwise.
    page.select_option("#window", "7d")
    page.wait_for_function("() => Number(document.getElementById('site-chart').dataset.points) >= 7 * 24")
    assert page.locator("#site-retained").is_hidden(), page.inner_text("#site-retained")
    assert page.inner_text("#site-pageviews") == str(expected["pageviews"])  # page views are all kept
    assert errors == []


def firefox_visit(profile: Path, agent: str, origin: str, steps: list[tuple[str, str]]) -> list[str]:
    """One visitor in a fresh Firefox whose user agent is `agent`: each step navigates to a URL
    or clicks an element; returns the bodies tally.js sent on the last page."""
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "user.js").write_text(f"user_pref({json.dumps('general.useragent.override')}, {json.dumps(agent)});\n")
    with bidi.firefox(profile) as page:
        for kind, target in steps:
            if kind == "goto":
                page.navigate(f"{origin}{target}")
                page.wait_until("window.sent && window.sent.length > 0", f"the page view of {target}")
            else:
                page.evaluate(f"document.getElementById({target!r}).click()")
        assert page.evaluate("navigator.userAgent") == agent
        count = sum(1 for kind, _ in steps if kind == "click") + 1
        return list(page.wait_until(f"window.sent.length >= {count} && window.sent.map(s => s[1])", "the beacons"))


def test_given_two_visitors_in_firefox_when_they_browse_the_site_and_its_app_then_the_summary_is_exact(
    stack: LocalStack, tmp_path: Path
) -> None:
    firefox_or_skip()
    site = "firefox.e2e"
    root = tmp_path / "site"
    root.mkdir()
    with serving(root) as origin:
        key = ingest_key(stack, origin)
        site_files(root, stack.url, key, site)
        sent = firefox_visit(
            tmp_path / "one", FIREFOX_AGENTS[0], origin,
            [("goto", "/index.html"), ("goto", "/app.html"), ("click", "settings"), ("click", "profile")],
        )  # fmt: skip
        assert [json.loads(b)["url"].removeprefix(counted_as(origin)) for b in sent] == [
            "/app.html",
            "/app/settings",
            "/app/profile",
        ]
        firefox_visit(tmp_path / "two", FIREFOX_AGENTS[1], origin, [("goto", "/about.html")])
        made = {"/index.html": 1, "/app.html": 1, "/app/settings": 1, "/app/profile": 1, "/about.html": 1}
        got = settled(stack, site, 5, 2)
        assert (got["pageviews"], got["visitors"]) == (5, 2)
        assert {p["path"]: p["pageviews"] for p in got["pages"]} == made
        resend(stack, f"{stack.url}/beacon/pageview?key={key}", sent[0], FIREFOX_AGENTS[0], origin)
        after = settled(stack, site, 5, 2)
        assert (after["pageviews"], after["visitors"]) == (5, 2)
        assert {p["path"]: p["pageviews"] for p in after["pages"]} == made
