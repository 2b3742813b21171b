"""app.py as the table of contents: every route maps errors one way, docs/api.md lists every route."""

from __future__ import annotations

from typing import Any

from tests.functional.helpers import API_REFERENCE, TABLE_ROW, declared_routes


def test_given_app_when_routes_listed_then_every_view_is_wrapped_by_the_error_mapping(app_module: Any) -> None:
    unwrapped = [
        f"{method} {path}"
        for path, entries in app_module.app.routes.items()
        for method, entry in entries.items()
        if method != "OPTIONS" and not getattr(entry.view_function, "maps_errors", False)
    ]
    assert declared_routes(app_module.app), "the app declares no route"
    assert unwrapped == []


def test_given_the_api_reference_when_its_table_read_then_it_lists_exactly_the_routes_app_declares(
    app_module: Any,
) -> None:
    documented = set(TABLE_ROW.findall(API_REFERENCE.read_text(encoding="utf-8")))
    declared = declared_routes(app_module.app)
    assert sorted(declared - documented) == [], "routes missing from docs/api.md"
    assert sorted(documented - declared) == [], "docs/api.md documents routes app.py does not declare"


def test_given_app_when_routes_listed_then_every_path_answers_a_cors_preflight(app_module: Any) -> None:
    assert [path for path, entries in app_module.app.routes.items() if "OPTIONS" not in entries] == []
