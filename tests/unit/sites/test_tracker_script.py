"""The tracker script: within its size budget, and free of what it promises not to use."""

from __future__ import annotations

import gzip
import re

from chalicelib.sites import script


def test_given_the_tracker_script_when_gzipped_then_at_most_one_and_a_half_kilobytes() -> None:
    body = script.script().body.encode("utf-8")
    assert len(gzip.compress(body, compresslevel=9)) <= script.MAX_GZIP_BYTES == 1536


def test_given_the_tracker_script_when_read_then_it_sets_no_cookie_and_writes_no_storage() -> None:
    code = "\n".join(line for line in script.script().body.splitlines() if not line.lstrip().startswith("//"))
    assert "document.cookie" not in code and ".cookie" not in code
    assert not re.search(r"(localStorage|sessionStorage)\.(setItem|removeItem|clear)|indexedDB", code)
    assert 'localStorage.getItem("tally_ignore")' in code  # the owner's opt-out, read only


def test_given_the_tracker_script_when_asked_with_its_version_then_immutable_else_an_hour() -> None:
    asset = script.script()
    assert asset.answer(None, asset.version)[1]["Cache-Control"] == "public, max-age=31536000, immutable"
    status, headers, _ = asset.answer(None)
    assert (status, headers["Cache-Control"]) == (200, "public, max-age=3600")
    assert asset.answer(asset.etag)[0] == 304
