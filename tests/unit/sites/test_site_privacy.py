"""The privacy core of site analytics: visitor ids, bot filtering, device classes, and what a
page URL and its referrer tell."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.sites import privacy

SALT_A = bytes(range(32))
SALT_B = bytes(range(1, 33))
UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36"
FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"


def test_given_same_inputs_and_salt_when_hashed_then_the_same_visitor_id() -> None:
    first = privacy.visitor_id(SALT_A, "blog.example", "203.0.113.7", UA)
    assert first == privacy.visitor_id(SALT_A, "blog.example", "203.0.113.7", UA)
    assert len(first) == 32 and int(first, 16) >= 0


def test_given_another_days_salt_when_hashed_then_another_visitor_id() -> None:
    assert privacy.visitor_id(SALT_A, "blog.example", "203.0.113.7", UA) != privacy.visitor_id(
        SALT_B, "blog.example", "203.0.113.7", UA
    )


@pytest.mark.parametrize(
    "other",
    [
        ("shop.example", "203.0.113.7", UA),
        ("blog.example", "203.0.113.8", UA),
        ("blog.example", "203.0.113.7", FIREFOX),
    ],
)
def test_given_another_site_ip_or_agent_when_hashed_then_another_visitor_id(other: tuple[str, str, str]) -> None:
    assert privacy.visitor_id(SALT_A, "blog.example", "203.0.113.7", UA) != privacy.visitor_id(SALT_A, *other)


@given(st.text(max_size=20), st.text(max_size=20), st.text(max_size=20), st.text(max_size=20))
def test_given_parts_moved_across_their_boundaries_when_hashed_then_ids_differ(a: str, b: str, c: str, d: str) -> None:
    # "ab" + "c" and "a" + "bc" must not hash alike: each part is length-prefixed.
    if d:
        assert privacy.visitor_id(SALT_A, a + d, b, c) != privacy.visitor_id(SALT_A, a, d + b, c)


def test_given_the_visitor_id_when_read_then_it_holds_neither_ip_nor_agent() -> None:
    vid = privacy.visitor_id(SALT_A, "blog.example", "203.0.113.7", UA)
    assert "203" not in vid and "Mozilla" not in vid


def test_given_a_short_salt_when_hashed_then_refused() -> None:
    with pytest.raises(ValueError):
        privacy.visitor_id(b"short", "blog.example", "203.0.113.7", UA)


@pytest.mark.parametrize(
    "agent",
    [
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
        "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)",
        "Mozilla/5.0 (Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/126.0 Safari/537.36",
        "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
        "Mozilla/5.0 (compatible; Baiduspider/2.0)",
        "Mozilla/5.0 (compatible; Yahoo! Slurp)",
        "Chrome-Lighthouse",
        "Pingdom.com_bot_version_1.4",
        "curl/8.5.0",
        "Wget/1.21",
        "python-requests/2.32",
        "Go-http-client/2.0",
        "okhttp/4.12",
        "",
        "   ",
        None,
    ],
)
def test_given_a_known_bot_or_no_agent_when_checked_then_it_is_a_bot(agent: str | None) -> None:
    assert privacy.is_bot(agent)


@pytest.mark.parametrize(
    "agent",
    [
        UA,
        FIREFOX,
        "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36 Edg/126.0",
        "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Mobile Safari/537.36",
    ],
)
def test_given_a_browser_when_checked_then_it_is_not_a_bot(agent: str) -> None:
    assert not privacy.is_bot(agent)


@pytest.mark.parametrize(
    ("width", "expected"),
    [(None, "(unknown)"), (0, "mobile"), (575, "mobile"), (576, "tablet"), (991, "tablet"), (992, "laptop"),
     (1439, "laptop"), (1440, "desktop"), (3840, "desktop")],
)  # fmt: skip
def test_given_a_viewport_width_when_classed_then_its_device(width: int | None, expected: str) -> None:
    assert privacy.device(width) == expected


def test_given_a_url_with_utm_fields_when_read_then_host_path_and_fields() -> None:
    got = privacy.page(
        "https://Blog.Example/posts/1?utm_source=news&utm_medium=email&utm_campaign=launch&x=1",
        "https://www.search.example/q?x",
    )
    assert got == privacy.Page("blog.example", "/posts/1", "search.example", "news", "email", "launch")
    assert got.has_utm


def test_given_no_referrer_or_the_site_itself_when_read_then_direct() -> None:
    assert privacy.page("https://blog.example/", None).referrer == "(direct)"
    assert privacy.page("https://blog.example/", "https://blog.example/other").referrer == "(direct)"
    assert privacy.page("https://blog.example/", "not a url").referrer == "(direct)"
    plain = privacy.page("https://blog.example", "")
    assert (plain.path, plain.utm_source, plain.has_utm) == ("/", "(none)", False)


def test_given_a_hash_route_when_read_then_the_fragment_is_part_of_the_path() -> None:
    assert privacy.page("http://127.0.0.1:8123/app#/settings", None).path == "/app#/settings"


@pytest.mark.parametrize(
    ("url", "counted", "path"),
    [
        ("https://user:password@Blog.Example:8443/posts/1?token=s3cret&email=a%40b.example", "https://blog.example/posts/1", "/posts/1"),
        ("https://user@blog.example/", "https://blog.example/", "/"),
        ("http://blog.example:80", "http://blog.example/", "/"),
        ("https://blog.example/app#/reset?token=s3cret&email=a@b.example", "https://blog.example/app#/reset", "/app#/reset"),
        ("https://blog.example/app?x=1#!/orders/7?page=2", "https://blog.example/app#!/orders/7", "/app#!/orders/7"),
        ("https://blog.example/app#?token=s3cret", "https://blog.example/app", "/app"),
        ("https://blog.example/app#", "https://blog.example/app", "/app"),
        ("http://u:p@[::1]:8123/app#/settings", "http://[::1]/app#/settings", "/app#/settings"),
    ],
)  # fmt: skip
def test_given_a_url_with_private_parts_when_read_then_no_user_info_port_or_query_is_kept(
    url: str, counted: str, path: str
) -> None:
    assert privacy.page_url(url) == counted
    assert privacy.page(url, None).path == path
    for private in ("user", "password", "8443", ":80", "8123", "s3cret", "email", "b.example", "page=2"):
        assert private not in privacy.page_url(url) + privacy.page(url, None).path


def test_given_a_route_query_when_read_then_only_the_route_path_is_kept() -> None:
    assert privacy.route("/reset?token=t&email=e") == "#/reset"
    assert privacy.route("section-2") == "#section-2"
    assert privacy.route("") == privacy.route("?token=t") == ""


@pytest.mark.parametrize("url", ["ftp://blog.example/", "https://", "https://user:pw@/x"])
def test_given_a_url_that_is_not_a_pages_when_its_counted_url_is_asked_then_refused(url: str) -> None:
    with pytest.raises(ValueError):
        privacy.page_url(url)


def test_given_a_long_path_when_read_then_it_is_clipped_to_a_dimension_value() -> None:
    assert len(privacy.page("https://blog.example/" + "a" * 500, None).path) == privacy.DIMENSION_MAX_CHARS


@pytest.mark.parametrize("url", ["ftp://blog.example/", "javascript:alert(1)", "/relative", "https://"])
def test_given_a_url_that_is_not_http_when_read_then_refused(url: str) -> None:
    with pytest.raises(ValueError):
        privacy.page(url, None)
