"""The catalogs' once-an-hour memory; report download formats. Pure."""

from __future__ import annotations

import pytest

from chalicelib.core import catalog
from chalicelib.core.errors import ValidationError
from chalicelib.reports import api as reports_api


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
