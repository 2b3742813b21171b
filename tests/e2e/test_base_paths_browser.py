"""tally.js and the dashboard wherever the API is served: under the stage's path on the
execute-api URL (`/api`, the dashboard opened without its trailing slash) and at the root of a
custom domain mapped there (a stack started with `--base-path /`). In chromium: a site's page
carrying the snippet is counted, and the dashboard, clicked through every tab, asks for nothing
that fails and nothing outside the API's base."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.stack import LocalStack, running_stack
from tests.e2e.test_dashboard_browser import CHROMIUM, FLAGS, browser_or_skip
from tests.e2e.test_tracker_browser import AGENTS, ingest_key, serving, settled, site_files

pytestmark = pytest.mark.e2e
TABS = ("Counters", "Unique counts", "Views", "Reports", "Quarantine", "Sites")


@pytest.fixture(scope="module")
def root_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    browser_or_skip()
    with running_stack(tmp_path_factory.mktemp("root-stack"), base_path="/") as running:
        yield running


class Traffic:
    """Every request a page makes, and those that failed or were answered with an error."""

    def __init__(self, page: Any) -> None:
        self.urls: list[str] = []
        self.failed: list[str] = []
        page.on("request", lambda request: self.urls.append(request.url))
        page.on("requestfailed", lambda request: self.failed.append(f"{request.url}: {request.failure}"))
        page.on("response", lambda response: self._answered(response))
        page.on("pageerror", lambda exc: self.failed.append(f"uncaught: {exc}"))

    def _answered(self, response: Any) -> None:
        if response.status >= 400:
            self.failed.append(f"{response.url}: HTTP {response.status}")


@pytest.mark.parametrize("mapping", ["stage", "root"])
def test_given_the_api_under_a_base_path_when_a_page_and_the_dashboard_load_from_it_then_counted_and_nothing_fails(
    mapping: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    sync_playwright = browser_or_skip()
    stack: LocalStack = request.getfixturevalue("local_stack" if mapping == "stage" else "root_stack")
    assert stack.base_path == ("/api" if mapping == "stage" else "")
    site = f"{mapping}.base.e2e"
    with serving(tmp_path) as origin, sync_playwright() as playwright:
        site_files(tmp_path, stack.url, ingest_key(stack, origin), site)  # src="<stack.url>/tally.js"
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            visit = browser.new_page(user_agent=AGENTS[0])  # headless chromium's own is a bot's
            visited = Traffic(visit)
            visit.goto(f"{origin}/index.html")
            visit.wait_for_function("window.sent.length === 1")
            (beacon,) = visit.evaluate("window.sent.map(s => s[0])")
            assert beacon.startswith(f"{stack.url}/beacon/pageview?key=")
            got = settled(stack, site, 1, 1)
            assert (got["pageviews"], got["visitors"]) == (1, 1)
            assert [p["path"] for p in got["pages"]] == ["/index.html"]
            assert visited.failed == []

            board = browser.new_page()
            loaded = Traffic(board)
            # Under the stage: /api, without the slash a relative URL would need.
            dashboard = stack.url or stack.origin + "/"
            board.goto(f"{dashboard}#key={stack.admin_key}")
            board.select_option("#window", "1h")
            for tab in TABS:
                board.get_by_role("tab", name=tab).click()
                board.wait_for_load_state("networkidle")
            board.select_option("#site-select", site)
            board.wait_for_function(
                "s => document.getElementById('site-title').textContent === s"
                " && document.getElementById('site-pageviews').textContent === '1'",
                arg=site,
            )
            board.wait_for_load_state("networkidle")
        finally:
            browser.close()
    assert loaded.failed == []
    asked = [url for url in loaded.urls if not url.startswith(("data:", "blob:"))]
    assert any("/sites/" in url for url in asked) and any("/dashboard/dashboard.js" in url for url in asked)
    assert [url for url in asked if not url.startswith(f"{stack.url}/") and url != dashboard] == []
