"""Catalog cursors, limits and the once-an-hour memory; report download formats. Pure."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core import catalog, validation
from chalicelib.core.errors import ValidationError
from chalicelib.reports import api as reports_api

NAMES = st.text(alphabet="ABCXYZabcxyz0189_.:-", min_size=1, max_size=200)


@given(NAMES)
def test_given_any_name_when_encoded_as_a_cursor_then_decoded_back_and_url_safe(name: str) -> None:
    cursor = catalog.encode_cursor(name)
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert catalog.decode_cursor(cursor, validation.name) == name


@given(st.text(max_size=60))
def test_given_any_text_as_a_cursor_then_a_valid_name_or_a_validation_error(raw: str) -> None:
    try:
        decoded = catalog.decode_cursor(raw, validation.name)
    except ValidationError:
        return
    assert decoded is None or validation.name(decoded) == decoded


def test_given_no_cursor_then_first_page() -> None:
    assert catalog.decode_cursor(None, validation.name) is None
    assert catalog.decode_cursor("", validation.name) is None


@pytest.mark.parametrize(("raw", "expected"), [(None, 100), ("1", 1), ("1000", 1000)])
def test_given_a_limit_then_parsed(raw: str | None, expected: int) -> None:
    assert catalog.page_limit(raw) == expected


@pytest.mark.parametrize("raw", ["0", "1001", "-1", "1.5", "", "ten"])
def test_given_a_bad_limit_then_validation_error(raw: str) -> None:
    with pytest.raises(ValidationError):
        catalog.page_limit(raw)


class FakeClient:
    """Stands for a DynamoDB client (the memory holds clients weakly)."""


def test_given_names_marked_in_an_hour_then_fresh_only_for_new_names_later_expiries_a_new_hour_or_another_client() -> (
    None
):
    recent = catalog.Recent()
    client, other = FakeClient(), FakeClient()
    assert recent.fresh(client, {"a": 5, "b": None}, 10) == ["a", "b"]
    recent.mark(client, {"a": 5, "b": None}, 10)
    assert recent.fresh(client, {"a": 5, "b": None, "c": 1}, 10) == ["c"]
    assert recent.fresh(client, {"a": 4}, 10) == []
    assert recent.fresh(client, {"a": 6}, 10) == ["a"]  # a longer retention must reach the item
    assert recent.fresh(other, {"a": 5}, 10) == ["a"]
    assert recent.fresh(client, {"a": 5}, 11) == ["a"]
    recent.mark(client, {"a": 5}, 11)  # the hour turned: the old hour's names are forgotten
    assert recent.fresh(client, {"a": 5, "b": None}, 11) == ["b"]


@pytest.mark.parametrize(
    ("path_id", "params", "expected"),
    [
        ("R", {}, ("R", "json")),
        ("R.csv", {}, ("R", "csv")),
        ("R.json", {}, ("R", "json")),
        ("R", {"format": "csv"}, ("R", "csv")),
        ("R.csv", {"format": "csv"}, ("R", "csv")),
    ],
)
def test_given_a_report_path_and_format_then_id_and_format(
    path_id: str, params: dict[str, str], expected: tuple[str, str]
) -> None:
    assert reports_api.download_format(path_id, params) == expected


@pytest.mark.parametrize(("path_id", "params"), [("R", {"format": "xml"}), ("R.csv", {"format": "json"})])
def test_given_a_bad_or_conflicting_format_then_validation_error(path_id: str, params: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        reports_api.download_format(path_id, params)
