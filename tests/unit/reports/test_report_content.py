"""A report's totals and its JSON and CSV renderings."""

from __future__ import annotations

import csv
import io
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.reports.content import Report, cell

amounts = st.decimals(min_value=-10_000, max_value=10_000, places=2, allow_nan=False, allow_infinity=False)
items = st.lists(
    st.fixed_dictionaries(
        {
            "counter": st.sampled_from(["a", "b", "c"]),
            "attributes": st.dictionaries(
                st.sampled_from(["amount", "qty", "label", "paid"]),
                st.one_of(amounts, st.text(max_size=3), st.booleans()),
                max_size=4,
            ),
        }
    ),
    max_size=40,
)


@given(items)
def test_given_items_when_added_then_events_and_sums_match_brute_force(batch: list[dict]) -> None:
    report = Report("r", 0, 1)
    report.add(batch)
    assert report.events == len(batch)
    for name, totals in report.counters.items():
        mine = [i for i in batch if i["counter"] == name]
        assert totals.events == len(mine)
        numeric = [(k, v) for i in mine for k, v in i["attributes"].items() if isinstance(v, Decimal)]
        # Text and booleans are never summed.
        assert set(totals.sums) == {k for k, _ in numeric}
        for attribute in totals.sums:
            assert totals.sums[attribute] == sum((v for k, v in numeric if k == attribute), Decimal(0))


def test_given_billing_events_when_rendered_then_json_and_csv_agree_exactly() -> None:
    report = Report("20261121T230000000Z-20261122T000000000Z", 1_795_000_000_000, 1_795_003_600_000)
    report.add(
        [
            {"counter": "sales", "attributes": {"amount": Decimal("0.10"), "qty": Decimal(2)}},
            {"counter": "sales", "attributes": {"amount": Decimal("0.20"), "note": "x"}},
            {"counter": "refunds", "attributes": {}},
        ]
    )
    body = report.as_dict()
    assert body["events"] == 3
    assert body["counters"] == {
        "refunds": {"events": 1, "sums": {}, "sums_exact": {}},
        "sales": {"events": 2, "sums": {"amount": 0.3, "qty": 2}, "sums_exact": {"amount": "0.30", "qty": "2"}},
    }
    rows = list(csv.reader(io.StringIO(report.as_csv())))
    assert rows == [["counter", "events", "amount", "qty"], ["refunds", "1", "", ""], ["sales", "2", "0.30", "2"]]


def test_given_no_events_when_rendered_then_empty_counters_and_header_only_csv() -> None:
    report = Report("r", 0, 1)
    assert report.as_dict()["events"] == 0
    assert report.as_dict()["counters"] == {}
    assert report.as_csv() == "counter,events\r\n"


digits38 = st.builds(
    lambda negative, digits, exponent: Decimal(f"{'-' if negative else ''}{digits}E{exponent}"),
    st.booleans(),
    st.integers(1, 10**38 - 1),
    st.integers(-60, 60),
)


@given(st.lists(digits38, min_size=1, max_size=30))
def test_given_numbers_of_up_to_38_digits_at_any_scale_when_summed_then_the_sums_are_exact(
    values: list[Decimal],
) -> None:
    report = Report("r", 0, 1)
    report.add([{"counter": "c", "attributes": {"amount": v}} for v in values])
    exact = sum((Fraction(v) for v in values), Fraction(0))
    assert Fraction(report.counters["c"].sums["amount"]) == exact
    # The JSON's sums_exact and the CSV hold every digit of it.
    assert Fraction(Decimal(report.as_dict()["counters"]["c"]["sums_exact"]["amount"])) == exact
    assert Fraction(Decimal(report.as_csv().splitlines()[1].split(",")[2])) == exact


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_given_a_name_starting_with_a_formula_character_when_rendered_as_csv_then_it_is_quoted(start: str) -> None:
    name = f"{start}HYPERLINK(1)"
    report = Report("r", 0, 1)
    report.add([{"counter": "sales", "attributes": {name: Decimal(1)}}])
    header, row = list(csv.reader(io.StringIO(report.as_csv())))
    assert header == ["counter", "events", f"'{name}"]
    assert row == ["sales", "1", "1"]
    assert cell(name) == f"'{name}"


@pytest.mark.parametrize(
    "raw, written",
    [
        ("-3", "-3"),  # a number: a spreadsheet runs nothing
        ("-0.25", "-0.25"),
        ("-2+3", "'-2+3"),
        ("-3e2", "'-3e2"),
        ('=HYPERLINK("https://evil.example","x")', '\'=HYPERLINK("https://evil.example","x")'),
        ("'=1", "''=1"),  # a raw leading quote is doubled, so removing one gives it back
        ("'plain", "''plain"),
        ("amount", "amount"),
        ("", ""),
        ("a=b", "a=b"),
    ],
)
def test_given_cell_text_when_neutralized_then_only_formulas_and_quotes_change(raw: str, written: str) -> None:
    assert cell(raw) == written
    assert (written[1:] if written.startswith("'") else written) == raw


def test_given_negative_sums_and_a_dashed_counter_when_rendered_then_numbers_stay_and_the_name_is_quoted() -> None:
    report = Report("r", 0, 1)
    report.add([{"counter": "-refunds", "attributes": {"amount": Decimal("-3"), "fee": Decimal("-0.50")}}])
    assert list(csv.reader(io.StringIO(report.as_csv()))) == [
        ["counter", "events", "amount", "fee"],
        ["'-refunds", "1", "-3", "-0.50"],
    ]


def test_given_names_holding_line_breaks_when_rendered_then_each_stays_one_cell() -> None:
    report = Report("r", 0, 1)
    report.add([{"counter": "sales", "attributes": {"a\rb": Decimal(1), "c\nd": Decimal(2), "e\r\nf": Decimal(3)}}])
    assert list(csv.reader(io.StringIO(report.as_csv(), newline=""))) == [
        ["counter", "events", "a\rb", "c\nd", "e\r\nf"],
        ["sales", "1", "1", "2", "3"],
    ]
