"""What counts as blank in a view's url and client id: the check and the document's pattern agree."""

from __future__ import annotations

import re
import sys
import unicodedata

import pytest

from chalicelib.core.errors import ValidationError
from chalicelib.views import validation

# ECMAScript's WhiteSpace and LineTerminator (ECMA-262): what `\s` means in the document's dialect.
ECMA_SPACE = {"\t", "\x0b", "\x0c", "\ufeff", "\n", "\r", "\u2028", "\u2029"}
ECMA_SPACE |= {chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Zs"}


def test_given_every_code_point_when_checked_then_blank_exactly_when_python_or_ecmascript_calls_it_space() -> None:
    pattern = re.compile(validation.NOT_BLANK)
    for point in range(sys.maxunicode + 1):
        char = chr(point)
        blank = char.isspace() or char in ECMA_SPACE
        assert (pattern.fullmatch(char) is None) == blank, hex(point)


@pytest.mark.parametrize("value", ["\x1e", " \t", "\ufeff", "\u3000\x85"])
def test_given_only_blank_characters_when_a_view_names_them_then_refused(value: str) -> None:
    with pytest.raises(ValidationError, match="non-blank"):
        validation.text(value, "view.clientId", 256)


def test_given_one_character_that_is_not_blank_when_checked_then_accepted() -> None:
    assert validation.text("\x1ej\x1e", "view.clientId", 256) == "\x1ej\x1e"
