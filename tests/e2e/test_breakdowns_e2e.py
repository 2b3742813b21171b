"""The README's quickstart lines for dimensions, values, filters and breakdowns, run as written
(curl through bash) against the local stack, answering as documented."""

from __future__ import annotations

import json
import os
import re
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

from tests.e2e.stack import LocalStack, wait_for

README = Path(__file__).resolve().parents[2] / "README.md"


def quickstart_lines(after_comment: str) -> list[str]:
    """The commands following a comment line of the README's quickstart, up to the next comment or blank."""
    lines = README.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# ") and after_comment in line)
    found = []
    for line in lines[start + 1 :]:
        if not line.strip() or line.startswith("#"):
            break
        found.append(line)
    assert found, after_comment
    return found


def run(stack: LocalStack, line: str) -> Any:
    env = {**os.environ, "API": stack.url, "AUTH": f"Authorization: Bearer {stack.admin_key}"}
    done = subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=env, timeout=60, check=True)
    return json.loads(done.stdout)


def test_given_the_readme_lines_when_run_against_the_local_stack_then_counts_filters_and_breakdown_answer(
    local_stack: LocalStack,
) -> None:
    (send,) = quickstart_lines("events with dimensions")
    assert "dimensions" in send and "values" in send
    assert len(run(local_stack, send)["ids"]) == 3
    whole, filtered, broken_down = quickstart_lines("the events with dimensions")
    assert re.search(r"where=provider:p2 .*where=region:eu", filtered)

    body = wait_for(partial(run, local_stack, whole), 120, "jobs counted", lambda b: b["count"] == 3)
    assert body["sums"] == {"amount": 12.8}  # 12.5 + 0.1 + 0.2, in decimal
    # A batch's items are written one after another: a filter's may land a moment after the counter's.
    body = wait_for(partial(run, local_stack, filtered), 60, "the filter counted", lambda b: b["count"] == 1)
    assert (body["count"], body["sums"], body["where"]) == (1, {"amount": 12.5}, {"provider": "p2", "region": "eu"})
    # The summaries are written after the buckets of the same records: until then the events
    # they miss are in `others`, so the list plus `others` is the count at every moment.
    body = wait_for(partial(run, local_stack, broken_down), 60, "summaries written", lambda b: not b["others"]["count"])
    assert body["values"] == [
        {"value": "p2", "count": 2, "sums": {"amount": 12.7}, "sums_exact": {"amount": "12.7"}},
        {"value": "p3", "count": 1, "sums": {"amount": 0.1}, "sums_exact": {"amount": "0.1"}},
    ]
    assert body["others"] == {"values": 0, "count": 0}
    assert body["exact"] is True and body["by"] == "provider" and body["complete"] is True
