"""View validation, message format, key layout and transaction packing (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core import times
from chalicelib.core.errors import ValidationError
from chalicelib.views import layout as view_keys
from chalicelib.views import messages as view_messages
from chalicelib.views import validation as view_input
from chalicelib.views.layout import marker_expires_at_s, marker_sk
from chalicelib.views.validation import View, check_time

T0 = 1_795_000_000_000
views = st.builds(
    View,
    url=st.text(min_size=1, max_size=300).filter(str.strip),
    time_ms=st.integers(times.MIN_TIME_MS, times.MAX_TIME_MS - 1),
    client_id=st.text(min_size=1, max_size=256).filter(str.strip),
)


@given(views)
def test_given_any_view_when_sent_as_message_then_read_back_equal(view: View) -> None:
    assert view_messages.from_message(view_messages.to_message(view)) == view


@given(views, views)
def test_given_two_views_when_keyed_then_same_marker_only_for_same_view(a: View, b: View) -> None:
    same = (view_keys.url_pk(a.url), marker_sk(a, "event")) == (view_keys.url_pk(b.url), marker_sk(b, "event"))
    assert same == (a == b)


@given(views, st.integers(0, view_keys.DAY_MS - 1))
def test_given_client_day_policy_when_same_client_same_day_then_one_marker(view: View, shift: int) -> None:
    day_start = view.time_ms - view.time_ms % view_keys.DAY_MS
    later = View(view.url, min(day_start + shift, times.MAX_TIME_MS - 1), view.client_id)
    assert view_keys.marker_sk(view, "client-day") == view_keys.marker_sk(later, "client-day")
    next_day = View(view.url, day_start + view_keys.DAY_MS, view.client_id)
    assert view_keys.marker_sk(view, "client-day") != view_keys.marker_sk(next_day, "client-day")


@given(views)
def test_given_long_url_when_keyed_then_keys_fit_dynamodb_limits(view: View) -> None:
    key = view_keys.counter_key(view.url * 50)
    assert len(key["pk"]["S"].encode()) <= 2048 and key["pk"]["S"].startswith("URL#")


@pytest.mark.parametrize(
    "body",
    [
        [1],
        {"url": "", "time": T0, "clientId": "c"},
        {"url": "   ", "time": T0, "clientId": "c"},
        {"url": "u" * 2049, "time": T0, "clientId": "c"},
        {"url": "a", "clientId": "c"},
        {"url": "a", "time": "yesterday", "clientId": "c"},
        {"url": "a", "time": T0, "clientId": "c" * 257},
        {"url": "a", "time": T0},
        {"url": "a", "time": T0, "clientId": "c", "extra": 1},
        {"views": []},
        {"views": [{"url": "a", "time": T0, "clientId": "c"}] * 26},
        {"views": [{"url": "a", "time": T0, "clientId": "c"}], "url": "b"},
    ],
)
def test_given_bad_body_when_parsed_then_validation_error(body: object) -> None:
    with pytest.raises(ValidationError):
        view_input.parse_body(body)


def test_given_batch_with_bad_view_when_parsed_then_error_names_it() -> None:
    body = {"views": [{"url": "a", "time": T0, "clientId": "c"}, {"url": "a", "time": T0, "clientId": ""}]}
    with pytest.raises(ValidationError, match=r"views\[1\]\.clientId"):
        view_input.parse_body(body)


def test_given_iso_time_when_parsed_then_same_view_as_epoch_ms() -> None:
    iso = view_input.parse_view({"url": "a", "time": times.iso(T0), "clientId": "c"})
    assert iso == view_input.parse_view({"url": "a", "time": T0, "clientId": "c"})


@pytest.mark.parametrize("body", ["not json", "[]", '{"url": "a"}', ""])
def test_given_broken_message_when_read_then_validation_error(body: str) -> None:
    with pytest.raises(ValidationError):
        view_messages.from_message(body)


@given(
    st.integers(1_600_000_000_000, 1_900_000_000_000),
    st.integers(0, 86_399_999),
    st.integers(0, 40 * 86_400_000),
    st.sampled_from(["event", "client-day"]),
    st.integers(86400, 60 * 86400),
)
def test_given_any_view_of_a_marker_accepted_by_the_horizon_check_then_the_marker_is_still_live(
    first_ms: int, later_in_day_ms: int, age_ms: int, policy: str, horizon_s: int
) -> None:
    """Every view a marker stands for (under client-day: any time of its UTC day) that the
    handler still accepts finds the marker unexpired (expires_at >= now in seconds)."""
    first = View("u", first_ms, "c")
    day_start = first_ms - first_ms % 86_400_000
    other_ms = day_start + later_in_day_ms if policy == "client-day" else first_ms
    assert marker_sk(View("u", other_ms, "c"), policy) == marker_sk(first, policy)
    now_ms = other_ms + age_ms
    try:
        check_time(View("u", other_ms, "c"), now_ms, horizon_s, None)
    except ValidationError:
        assert age_ms >= horizon_s * 1000
        return
    assert marker_expires_at_s(first_ms, policy, horizon_s) > now_ms // 1000
