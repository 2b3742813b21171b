"""The tracker in headless chromium counted through each of its two doors on the local stack: the
function URL (script and beacon from `/beacon-url/`, payload format 2.0 events, the function
URL's CORS) and the REST API's routes under the stage's path. Each door is its own site: its
page view is counted once, and its beacon went where its script came from."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.stack import LocalStack
from tests.e2e.test_dashboard_browser import CHROMIUM, FLAGS, browser_or_skip
from tests.e2e.test_tracker_browser import AGENTS, RECORD, ingest_key, serving, settled
from tools import function_url

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.e2e.stack import running_stack

    with running_stack(tmp_path_factory.mktemp("tracker-url-stack")) as running:
        yield running


def answered(page: Any, answers: list[Any], seconds: float = 60) -> None:
    """Wait until the beacon's answer has come (on a busy machine it can take seconds)."""
    for _ in range(int(seconds * 10)):
        if answers:
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"no answer to the beacon in {seconds} s")


def script_base(stack: LocalStack, door: str) -> str:
    if door == "function URL":
        return f"http://127.0.0.1:{stack.port}{function_url.PATH_PREFIX}"
    return stack.url


@pytest.mark.parametrize("door", ["function URL", "REST API"])
def test_given_the_tracker_script_from_one_door_when_a_page_loads_in_chromium_then_its_view_counts_through_it(
    stack: LocalStack, tmp_path: Path, door: str
) -> None:
    sync_playwright = browser_or_skip()
    site = "url.e2e" if door == "function URL" else "rest.e2e"
    base = script_base(stack, door)
    with serving(tmp_path) as origin:
        key = ingest_key(stack, origin)
        snippet = f'<script defer src="{base}/tally.js" data-key="{key}" data-site="{site}" data-allow-local></script>'
        (tmp_path / "index.html").write_text(f"<!doctype html><html><head>{RECORD}{snippet}</head><body></body></html>")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
            try:
                page = browser.new_context(user_agent=AGENTS[0]).new_page()
                answers: list[Any] = []
                page.on("response", lambda r: answers.append(r) if "/beacon/pageview" in r.url else None)
                warnings: list[str] = []
                page.on("console", lambda m: warnings.append(m.text) if m.text.startswith("tally:") else None)
                page.goto(f"{origin}/index.html")
                page.wait_for_function("window.sent.length === 1")
                sent_to = page.evaluate("window.sent[0][0]")
                answered(page, answers)
                page.wait_for_timeout(500)  # a warning, if the page could not read the answer
            finally:
                browser.close()
        assert sent_to.startswith(f"{base}/beacon/pageview?key="), sent_to
        assert [a.status for a in answers] == [202]
        assert warnings == []  # the page read the 202: CORS let it
        if door == "function URL":
            assert answers[0].headers.get("access-control-allow-origin") == "*"
        else:
            assert answers[0].headers.get("access-control-allow-origin") == origin
        got = settled(stack, site, 1, 1)
        assert (got["pageviews"], got["visitors"]) == (1, 1)
        assert [p["path"] for p in got["pages"]] == ["/index.html"]


def readme_tracker_section() -> str:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    return readme.split("### Web analytics in one script tag", 1)[1].split("\n## ", 1)[0]


def test_given_the_readme_tracker_recipe_when_followed_verbatim_in_chromium_then_the_summary_counts_the_page_view(
    stack: LocalStack, tmp_path: Path
) -> None:
    """The README's key request and script tag, as written (only the key, the stack's port and the
    page's port filled in), on a page served from this machine: counted, no warning."""
    sync_playwright = browser_or_skip()
    section = readme_tracker_section()
    body = re.search(r"-XPOST \$API/keys -d '(\{.*?\})'", section)
    tag = re.search(r"echo '(<script .*?</script>)' > (\S+)", section)
    asked = re.search(r"\$API/sites/(\S+)/summary --data-urlencode window=(\w+)", section)
    assert body and tag and asked, "the README's tracker recipe changed shape"
    answer = stack.post("/keys", json=json.loads(body.group(1)))
    assert answer.status_code == 201, answer.text
    snippet = tag.group(1).replace("tly_...", answer.json()["key"]).replace(":8000/", f":{stack.port}/")
    (tmp_path / tag.group(2)).write_text(snippet)
    with serving(tmp_path) as origin, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        try:
            page = browser.new_context(user_agent=AGENTS[0]).new_page()
            answers: list[int] = []
            page.on("response", lambda r: answers.append(r.status) if "/beacon/pageview" in r.url else None)
            warnings: list[str] = []
            page.on("console", lambda m: warnings.append(m.text) if m.text.startswith("tally:") else None)
            page.goto(f"{origin}/{tag.group(2)}")
            answered(page, answers)
            page.wait_for_timeout(500)  # a warning, if the page could not read the answer
        finally:
            browser.close()
    assert (answers, warnings) == ([202], [])
    site = asked.group(1)
    settled(stack, site, 1, 1)
    got = stack.get(f"/sites/{site}/summary", params={"window": asked.group(2)}).json()
    assert (got["pageviews"], got["visitors"]) == (1, 1)
    assert [p["path"] for p in got["pages"]] == ["/" + tag.group(2)]
