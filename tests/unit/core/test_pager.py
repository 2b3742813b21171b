"""The listings' pager: cursors, limits and positions across partitions. Pure."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core import pager, validation
from chalicelib.core.errors import ValidationError

NAMES = st.text(alphabet="ABCXYZabcxyz0189_.:-", min_size=1, max_size=200)


@given(NAMES)
def test_given_any_name_when_encoded_as_a_cursor_then_decoded_back_and_url_safe(name: str) -> None:
    cursor = pager.encode_cursor(name)
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert pager.decode_cursor(cursor, validation.name) == name


@given(st.text(max_size=60))
def test_given_any_text_as_a_cursor_then_a_valid_name_or_a_validation_error(raw: str) -> None:
    try:
        decoded = pager.decode_cursor(raw, validation.name)
    except ValidationError:
        return
    assert decoded is None or validation.name(decoded) == decoded


def test_given_no_cursor_then_first_page() -> None:
    assert pager.decode_cursor(None, validation.name) is None
    assert pager.decode_cursor("", validation.name) is None


@pytest.mark.parametrize(("raw", "expected"), [(None, 100), ("1", 1), ("1000", 1000)])
def test_given_a_limit_then_parsed(raw: str | None, expected: int) -> None:
    assert pager.page_limit(raw) == expected


@pytest.mark.parametrize("raw", ["0", "1001", "-1", "1.5", "", "ten"])
def test_given_a_bad_limit_then_validation_error(raw: str) -> None:
    with pytest.raises(ValidationError):
        pager.page_limit(raw)


@pytest.mark.parametrize(
    ("params", "after", "limit"), [({}, None, 100), ({"cursor": pager.encode_cursor("b"), "limit": "7"}, "b", 7)]
)
def test_given_listing_parameters_then_one_page_request(params: dict[str, str], after: str | None, limit: int) -> None:
    assert pager.page_request(params, validation.name) == pager.PageRequest(after, limit)


@pytest.mark.parametrize("params", [{"cursor": "%%%"}, {"cursor": pager.encode_cursor("a b")}, {"limit": "0"}])
def test_given_a_bad_cursor_or_limit_then_the_page_request_is_refused(params: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        pager.page_request(params, validation.name)


def test_given_a_position_across_partitions_then_split_at_the_first_hash_and_the_label_checked() -> None:
    assert pager.split_position("b#x#y", ["a", "b"]) == ("b", "x#y")
    assert pager.split_position("a#", ["a", "b"]) == ("a", "")
    for bad in ["c#x", "ax", ""]:
        with pytest.raises(ValueError):
            pager.split_position(bad, ["a", "b"])
