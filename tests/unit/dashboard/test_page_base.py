"""The dashboard page names its assets and the API relative to its own URL, whatever the base
path the API is served under (API Gateway's stage, a custom domain's mapping)."""

from __future__ import annotations

from urllib.parse import urljoin

import pytest

from chalicelib.dashboard import assets


@pytest.mark.parametrize(
    ("page_url", "base"),
    [
        (
            "https://abc.execute-api.us-east-1.amazonaws.com/api/",
            "https://abc.execute-api.us-east-1.amazonaws.com/api/",
        ),
        ("https://abc.execute-api.us-east-1.amazonaws.com/api", "https://abc.execute-api.us-east-1.amazonaws.com/api/"),
        ("https://tally.example/", "https://tally.example/"),
        ("https://example.com/tally", "https://example.com/tally/"),
        ("https://example.com/tally/", "https://example.com/tally/"),
        ("https://example.com/a/b", "https://example.com/a/b/"),
    ],
)
def test_given_the_page_at_a_base_with_or_without_its_slash_when_its_urls_resolve_then_under_that_base(
    page_url: str, base: str
) -> None:
    path = "/" + page_url.split("/", 3)[3]
    html = assets.page(assets.relative_base(path)).body
    version = assets.asset("dashboard.js").version
    script = next(part.split('"')[1] for part in html.split("<script")[1:] if "dashboard.js" in part)
    assert urljoin(page_url, script) == f"{base}dashboard/dashboard.js?v={version}"
    link = html.split('class="contract" href="')[1].split('"')[0]
    assert urljoin(page_url, link) == f"{base}openapi.json"
    assert "{{" not in html


def test_given_no_path_when_the_base_is_asked_then_the_page_is_relative_to_itself() -> None:
    assert assets.relative_base("") == assets.relative_base("/") == ""
    assert assets.relative_base("/a b") == "a%20b/"
