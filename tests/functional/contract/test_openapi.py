"""The OpenAPI document: valid, served without a key, naming exactly the routes app.py declares
and docs/api.md lists, its bounds the validation code's own."""

from __future__ import annotations

import json
import re
from decimal import Context, Decimal, localcontext
from typing import Any

import jsonschema
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from openapi_spec_validator import validate

from chalicelib.access import policy
from chalicelib.contract import document, schemas
from chalicelib.core import inputs, times, validation, window_params
from chalicelib.core.errors import ValidationError
from chalicelib.events import dimensions
from tests.functional.helpers import API_REFERENCE, TABLE_ROW, declared_routes


def operations(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, entries in doc["paths"].items() for method in entries}


def test_given_the_document_when_validated_then_it_is_valid_openapi_3_1() -> None:
    doc = document.build()
    validate(doc)
    assert doc["openapi"].startswith("3.1")


def test_given_no_key_when_openapi_json_requested_then_the_document_is_answered(client: Any) -> None:
    response = client.http.with_key(None).get("/openapi.json")
    assert response.status_code == 200, response.body
    served = json.loads(response.body)
    validate(served)
    assert served == json.loads(json.dumps(document.build()))


def test_given_app_when_routes_listed_then_the_document_names_exactly_them(app_module: Any) -> None:
    documented = operations(document.build())
    declared = declared_routes(app_module.app)
    assert sorted(declared - documented) == [], "routes missing from chalicelib/contract/routes.py"
    assert sorted(documented - declared) == [], "the document names routes app.py does not declare"


def test_given_the_api_reference_when_its_table_read_then_it_names_the_documents_operations() -> None:
    table = set(TABLE_ROW.findall(API_REFERENCE.read_text(encoding="utf-8")))
    assert table == operations(document.build())


def test_given_each_operation_when_its_security_read_then_it_is_the_access_tables_scope() -> None:
    doc = document.build()
    for (method, path), access in policy.ROUTES.items():
        security = doc["paths"][path][method.lower()]["security"]
        if access.beacon:
            assert security == [{document.BEACON: []}]
        elif access.scope is None:
            assert security == []
        else:
            assert security == [{document.BEARER: [access.scope]}], f"{method} {path}"
        responses = doc["paths"][path][method.lower()]["responses"]
        assert ("401" in responses) == (access.scope is not None), f"{method} {path}"


def test_given_every_error_response_when_read_then_it_is_chalices_error_shape() -> None:
    doc = document.build()
    error = doc["components"]["schemas"]["Error"]
    assert error["required"] == ["Code", "Message"]
    for name, response in doc["components"]["responses"].items():
        assert response["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}, name


def name_in_document(value: str) -> bool:
    try:
        jsonschema.validate(value, schemas.NAME)
    except jsonschema.ValidationError:
        return False
    return True


def name_in_code(value: str) -> bool:
    try:
        validation.name(value)
    except ValidationError:
        return False
    return True


@given(st.one_of(st.text(max_size=210), st.from_regex(validation.NAME_PATTERN, fullmatch=True)))
def test_given_any_text_when_checked_as_a_name_then_the_document_and_the_code_agree(value: str) -> None:
    assert name_in_document(value) == name_in_code(value)


@pytest.mark.parametrize(
    "value",
    ["24h", "90m", "7d", "1m", "24", "h", "24H", " 24h", "1234567m", "0m", "400d", "401d", "9601h", "٣h", "0024h"],
)
def test_given_a_window_when_checked_then_the_document_and_the_code_agree(value: str) -> None:
    by_document = re.search(schemas.WINDOW["pattern"], value) is not None and len(value) <= schemas.WINDOW["maxLength"]
    try:
        minutes = validation.duration_minutes(value)
        by_code = minutes <= window_params.MAX_WINDOW_MINUTES
    except ValidationError:
        by_code = False
    assert by_document == by_code


# -- numbers: the document's bounds are the door's (events/dimensions.py, core/inputs.py) ----------


def as_served(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema as a client reads the served document: numbers as the decimals they spell."""
    return dict(json.loads(json.dumps(schema), parse_float=Decimal))


def in_document(value: Decimal, schema: dict[str, Any]) -> bool:
    with localcontext(Context(prec=200)):  # multipleOf exact for every value drawn
        try:
            jsonschema.validate(value, schema)
        except jsonschema.ValidationError:
            return False
    return True


def near(digits: int, exponents: tuple[int, int]) -> st.SearchStrategy[Decimal]:
    return st.builds(
        lambda sign, mantissa, exponent: Decimal(f"{sign}{mantissa}E{exponent}"),
        st.sampled_from(["", "-"]),
        st.integers(min_value=0, max_value=10**digits - 1),
        st.integers(min_value=exponents[0], max_value=exponents[1]),
    )


@given(near(30, (-40, 20)))
@example(dimensions.VALUE_MAX)
@example(-dimensions.VALUE_MAX)
@example(dimensions.VALUE_MAX + dimensions.VALUE_STEP)
@example(Decimal("0.0000001"))
@example(Decimal("1.0000000000000000000000000000000000000000"))
def test_given_any_value_when_checked_then_the_document_and_the_code_agree(value: Decimal) -> None:
    try:
        dimensions.summable(value, "v")
        by_code = True
    except ValidationError:
        by_code = False
    assert in_document(value, as_served(schemas.VALUE)) == by_code


@given(near(30, (-170, 130)))
@example(Decimal("1E-130"))
@example(Decimal("-1E-131"))
@example(Decimal("9.99E+125"))
@example(Decimal("1E+126"))
@example(Decimal("0E+999"))
def test_given_any_number_of_up_to_30_digits_when_checked_then_the_document_and_the_code_agree(value: Decimal) -> None:
    # The document cannot count digits (it says so); within 30 of them its range is the code's.
    try:
        inputs.number(value, "n")
        by_code = True
    except ValidationError:
        by_code = False
    served = as_served(schemas.ATTRIBUTE_NUMBER)
    assert in_document(value, served) == by_code


@given(
    st.from_regex(schemas.ISO_TIME_PATTERN, fullmatch=True)
    | st.from_regex(schemas.TIME_DIGITS, fullmatch=True).filter(lambda v: len(v) <= times.TIME_DIGITS_MAX)
)
def test_given_any_time_text_the_document_admits_when_parsed_then_the_code_takes_it(value: str) -> None:
    assert times.MIN_TIME_MS <= times.parse(value) < times.MAX_TIME_MS


@pytest.mark.parametrize("high", [1, 9, 10, 99, 100, 5000, 576000, 4102444799999])
def test_given_an_integer_range_when_written_as_a_pattern_then_it_matches_exactly_that_range(high: int) -> None:
    pattern = re.compile(schemas.anchored(schemas.integers(1, high)))
    probes = {0, 1, 9, 10, 11, 99, 100, 101, high - 1, high, high + 1, 10 * high, high // 2}
    assert {n for n in probes if pattern.search(str(n))} == {n for n in probes if 1 <= n <= high}


def test_given_integral_numbers_written_with_a_fraction_when_posted_then_they_are_integers(
    client: Any, clock: Any
) -> None:
    # JSON Schema (and JSON) call 1795000000000.0 an integer as much as 1795000000000.
    body = {"counter": "c", "time": float(clock.now), "retention": 9e4}
    response = client.http.post("/events", headers={"Content-Type": "application/json"}, body=json.dumps(body))

    assert response.status_code == 201, response.body
    fractional = {**body, "retention": 90000.5}
    refused = client.http.post("/events", headers={"Content-Type": "application/json"}, body=json.dumps(fractional))
    assert refused.status_code == 400
