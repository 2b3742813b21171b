"""What every request's input must be before any parser looks at it; each check raises ValidationError naming
where the input went wrong. Pure. The bounds: docs/api.md, "Limits, checked before any work"; why numbers are
bounded so: docs/guarantees.md, "DynamoDB numbers: 38 digits, a bounded range, trailing zeros trimmed"."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from decimal import Context, Decimal, Inexact
from typing import Any

from chalicelib.core.errors import ValidationError

MAX_BODY_BYTES = 6 * 1024 * 1024  # what Lambda accepts as a request payload
MAX_VALUES = 50_000
MAX_DEPTH = 40  # a body's own nesting plus DynamoDB's 32 levels of nested attributes
MAX_STORED_DEPTH = 32  # DynamoDB's limit on nested attributes
MAX_QUERY_PARAMS = 20
MAX_QUERY_CHARS = 4096
MAX_NUMBER_DIGITS = 38
MIN_NUMBER_EXPONENT = -130  # adjusted exponent: the smallest magnitude is 1E-130
MAX_NUMBER_EXPONENT = 125  # the largest is 9.99...E+125
MIN_DIGIT_EXPONENT = -165  # boto3's finest digit (DYNAMODB_CONTEXT's Etiny); why a finer one is refused: above
_CANONICAL = Context(prec=MAX_NUMBER_DIGITS)  # exact for every storable number
# Rounding to 38 digits without traps: Inexact is raised exactly when a nonzero digit is lost.
_DIGITS = Context(prec=MAX_NUMBER_DIGITS, traps=[])
_ASCII_DIGITS = re.compile(r"[0-9]+")
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # what UTF-8 cannot encode


def json_body(raw: bytes | str | None) -> Any:
    """The request body as JSON, every check above applied; floats come back as Decimal."""
    if not raw:
        raise ValidationError("the request needs a JSON body")
    if len(raw) > MAX_BODY_BYTES:  # bytes from HTTP; a str (a queue message, at most 1 MiB) in characters
        raise ValidationError(f"the body is larger than {MAX_BODY_BYTES} bytes")
    if value_bound(raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw) > MAX_VALUES:
        raise ValidationError(f"the body holds more than {MAX_VALUES} JSON values")
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        value = json.loads(text, parse_float=Decimal, parse_constant=_no_constant)
    except RecursionError as exc:
        raise ValidationError(f"the body is nested deeper than {MAX_DEPTH} levels") from exc
    except ArithmeticError as exc:  # Decimal's InvalidOperation: an exponent past 10**18 in magnitude
        raise ValidationError(
            f"the body holds a number whose exponent is out of any range (DynamoDB's numbers lie within "
            f"1E{MIN_NUMBER_EXPONENT} to below 1E+{MAX_NUMBER_EXPONENT + 1})"
        ) from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValidationError(f"the body is not valid JSON: {exc}") from exc
    check_tree(value, "body")
    return value


def value_bound(data: bytes) -> int:
    """At least the number of JSON values in `data`, counted at C speed without parsing. Why it
    is never fewer: docs/api.md, "Conventions" (limits, checked before any work)."""

    def count(text: bytes) -> int:
        return text.count(b",") + text.count(b"[") + text.count(b"{") + 1

    rough = count(data)
    return rough if rough <= MAX_VALUES else count(_JSON_STRING.sub(b'""', data))


def check_tree(value: Any, where: str, max_depth: int = MAX_DEPTH) -> None:
    """Depth, text and numbers of a parsed JSON value, walked without recursion; the message
    names where the first fault is."""
    if not _sound(value, max_depth):
        _name_fault(value, where, max_depth)


def _sound(value: Any, max_depth: int) -> bool:
    """The fast pass: no paths built, one look at each value."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        node, depth = pending.pop()
        kind = type(node)
        if kind is dict or kind is list:
            if depth > max_depth:
                return False
            children = node.values() if kind is dict else node
            pending.extend((child, depth + 1) for child in children)
            if kind is dict and any(_LONE_SURROGATE.search(key) for key in node):
                return False
        elif kind is str:
            if _LONE_SURROGATE.search(node):
                return False
        elif (kind is int or kind is Decimal) and not _storable(node):
            return False
    return True


def _name_fault(value: Any, where: str, max_depth: int) -> None:
    """The slow pass, only for a body the fast one refused: the same walk, with paths."""
    pending: list[tuple[Any, str, int]] = [(value, where, 1)]
    while pending:
        node, path, depth = pending.pop()
        if isinstance(node, (dict, list)) and depth > max_depth:
            raise ValidationError(f"{where} is nested deeper than {max_depth} levels")
        if isinstance(node, dict):
            for key, child in node.items():
                text(key, f"a key of {path}")
                pending.append((child, f"{path}.{_clip(key)}", depth + 1))
        elif isinstance(node, list):
            pending.extend((child, f"{path}[{i}]", depth + 1) for i, child in enumerate(node))
        elif isinstance(node, str):
            text(node, path)
        elif isinstance(node, (int, Decimal)) and not isinstance(node, bool):
            number(node, path)
    raise AssertionError("the fast pass refused a body the slow pass accepts")


def text(value: str, field: str) -> str:
    """`value` if it can be encoded as UTF-8; ValidationError naming `field` if it holds a lone
    UTF-16 surrogate (valid in JSON escapes, never valid text)."""
    lone = _LONE_SURROGATE.search(value)
    if lone:
        raise ValidationError(
            f"{field} is not valid text: it holds a lone UTF-16 surrogate at character {lone.start()}"
        )
    return value


def number(value: int | Decimal, field: str) -> int | Decimal:
    """`value` if DynamoDB can store it as a number, else ValidationError naming `field`."""
    if not _storable(value):
        raise ValidationError(
            f"{field} is outside DynamoDB's number range (finite, at most {MAX_NUMBER_DIGITS} significant "
            f"digits, magnitude from 1E{MIN_NUMBER_EXPONENT} to below 1E+{MAX_NUMBER_EXPONENT + 1}, or 0; "
            f"no digit below 1E{MIN_DIGIT_EXPONENT})"
        )
    return value


def canonical(value: int | Decimal) -> Decimal:
    """The shortest form of a storable number (`number`), the one Tally stores (why: the docs above): any
    zero is 0, a whole number below 1E+38 has no exponent (`1E+3` is 1000), any other no trailing zeros."""
    if type(value) is int and -(10**MAX_NUMBER_DIGITS) < value < 10**MAX_NUMBER_DIGITS:
        return Decimal(value)
    exact = Decimal(value)
    if exact.is_zero():
        return Decimal(0)
    shortest = exact.normalize(_CANONICAL)
    exponent = shortest.as_tuple().exponent
    assert isinstance(exponent, int)  # finite: storable
    if exponent > 0 and shortest.adjusted() < MAX_NUMBER_DIGITS:
        return shortest.quantize(Decimal(1), context=_CANONICAL)
    return shortest


def _storable(value: int | Decimal) -> bool:
    if type(value) is int and -(10**MAX_NUMBER_DIGITS) < value < 10**MAX_NUMBER_DIGITS:
        return True  # the common case, without Decimal arithmetic
    exact = Decimal(value)
    if not exact.is_finite():
        return False
    if exact.is_zero():
        return True
    if not MIN_NUMBER_EXPONENT <= exact.adjusted() <= MAX_NUMBER_EXPONENT:
        return False
    # Rounded to 38 digits in C, whatever the number of digits written (a million trailing
    # zeros cost what one does); the digits tuple of such a number would take seconds to build.
    context = _DIGITS.copy()  # flags are the context's own
    shortest = context.normalize(exact)
    if context.flags[Inexact]:
        return False  # more than 38 significant digits
    lowest = shortest.as_tuple().exponent  # the exponent of the last nonzero digit
    assert isinstance(lowest, int)  # finite
    return lowest >= MIN_DIGIT_EXPONENT


def query(params: Mapping[str, str] | None) -> dict[str, str]:
    """A request's query parameters, bounded in number and length, each valid text."""
    found = dict(params or {})
    if len(found) > MAX_QUERY_PARAMS:
        raise ValidationError(f"a request takes at most {MAX_QUERY_PARAMS} query parameters")
    for name, value in found.items():
        shown = _clip(ascii(name))  # escaped: a lone surrogate cannot be sent back
        if len(name) > MAX_QUERY_CHARS or len(value) > MAX_QUERY_CHARS:
            raise ValidationError(f"query parameter {shown} is longer than {MAX_QUERY_CHARS} characters")
        text(name, "a query parameter name")
        text(value, f"query parameter {shown}")
    return found


def digits(value: str, field: str, max_digits: int) -> int:
    """A non-negative integer written in ASCII digits only: `str.isdigit()` also accepts '²' and
    other digits `int()` refuses, and `int()` accepts '٣', '1_000' and spaces."""
    stripped = value.strip()
    if len(stripped) > max_digits or not _ASCII_DIGITS.fullmatch(stripped):
        raise ValidationError(f"{field} must be an integer of at most {max_digits} digits 0-9")
    return int(stripped)


def _no_constant(name: str) -> Any:
    raise ValidationError(f"the body is not valid JSON: {name} is not a number JSON allows")


def _clip(value: str) -> str:
    return value if len(value) <= 60 else value[:57] + "..."
