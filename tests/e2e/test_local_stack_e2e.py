"""The local stack as a service: it keeps its data, fails clearly, runs beside other stacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.e2e.stack import PROJECT, LocalStack, free_port, running_stack, stack_command, wait_for


def answers(api: LocalStack) -> dict[str, Any]:
    """Everything a client can read: counts, a histogram, views, a unique count, reports."""
    return {
        "count": api.get("/counters/kept", params={"window": "2h"}, timeout=10).json()["count"],
        "histogram": api.get(
            "/counters/kept/histogram", params={"window": "2h", "resolution": "hour"}, timeout=10
        ).json()["buckets"],
        "views": api.get("/views", params={"url": "https://blog.example/kept"}, timeout=10).json()["views"],
        "uniques": api.get("/hyperloglog/kept", timeout=10).json()["cardinality"],
        "reports": api.get("/reports", timeout=10).json()["reports"],
    }


def json_lines_only(stack: LocalStack) -> list[dict[str, Any]]:
    lines = [line for line in stack.log().splitlines() if line.strip()]
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except ValueError as exc:
            raise AssertionError(f"not a JSON log line: {line!r}") from exc
    return parsed


def test_given_data_when_stack_stopped_and_started_then_same_answers_and_fresh_starts_empty(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with running_stack(tmp_path, state_dir=state, log_name="first.log") as first:
        api = first
        events = [{"counter": "kept", "id": f"k-{i}"} for i in range(7)]
        assert api.post("/events", json={"events": events}, timeout=10).status_code == 201
        view = {"url": "https://blog.example/kept", "time": "2026-11-21T10:15:00Z", "clientId": "c-1"}
        assert api.post("/views", json=view, timeout=10).status_code == 202
        assert api.post("/hyperloglog/kept", json={"data": ["a", "b", "c"]}, timeout=10).status_code == 202
        assert api.post("/reports", timeout=30).status_code == 201
        before = wait_for(
            lambda: (a := answers(api))["count"] == 7 and a["views"] == 1 and a["uniques"] == 3 and a,
            60,
            "the handlers",
        )
        # A view still queued when the stack stops is kept too.
        view2 = {**view, "clientId": "c-2"}
        assert api.post("/views", json=view2, timeout=10).status_code == 202
    lines = json_lines_only(first)
    assert not [line for line in lines if "credentials" in str(line.get("message", "")).lower()]

    with running_stack(tmp_path, state_dir=state, log_name="second.log") as second:
        after = answers(second)
        assert {**after, "views": None} == {**before, "views": None}
        # Restored events are not counted again; the queued view is applied once.
        wait_for(lambda: answers(second)["views"] == 2, 30, "the view queued at stop")
        assert answers(second)["count"] == 7

    with running_stack(tmp_path, "--fresh", state_dir=state, log_name="third.log") as fresh:
        empty = answers(fresh)
        assert (empty["count"], empty["views"], empty["uniques"], empty["reports"]) == (0, 0, 0, [])


def test_given_a_running_stack_when_another_starts_beside_it_or_on_its_ports_then_no_interference(
    tmp_path: Path,
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with running_stack(tmp_path / "a") as a, running_stack(tmp_path / "b") as b:
        assert a.post("/events", json={"counter": "mine", "id": "x"}, timeout=10).status_code == 201
        wait_for(lambda: a.get("/counters/mine", timeout=5).json()["count"] == 1, 30, "the count")
        assert b.get("/counters/mine", timeout=5).json()["count"] == 0
        assert (a.state_dir / "pid").read_text() != (b.state_dir / "pid").read_text()

        # `make trigger PORT=...` reaches the stack on that port only.
        a.trigger_schedules()
        wait_for(lambda: '"function":"run_scheduled_report"' in a.log(), 30, "the triggered report")
        assert '"function":"run_scheduled_report"' not in b.log()

        # Either port taken: the new stack stops at once, naming the port and how to choose another.
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        for port, aws_port, busy, variable in (
            (a.port, free_port(), a.port, "PORT="),
            (free_port(), a.aws_port, a.aws_port, "AWS_PORT="),
        ):
            clash = subprocess.run(
                stack_command(port, aws_port, tmp_path / "clash"),
                cwd=PROJECT,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert clash.returncode == 2, clash.stdout + clash.stderr
            assert f"port {busy}" in clash.stderr and variable in clash.stderr
            assert "Traceback" not in clash.stderr + clash.stdout

    # No stack on that port (any more): trigger says so instead of signalling nobody.
    missing = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.local_stack",
            "--trigger",
            "--port",
            str(a.port),
            "--state-dir",
            str(a.state_dir),
        ],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1 and f"no local stack is running with its API on port {a.port}" in missing.stderr


def test_given_the_stack_when_curl_asks_outside_the_stage_path_then_api_gateways_403_and_inside_the_api(
    local_stack: LocalStack,
) -> None:
    """`curl http://127.0.0.1:8000/counters/x`, as a user reading an old URL would: the API is
    under the stage's path (`/api`), and API Gateway answers a path outside every stage itself."""
    assert local_stack.url == f"{local_stack.origin}/api"

    def curl(*args: str) -> tuple[int, dict[str, str], str]:
        done = subprocess.run(["curl", "-s", "-i", *args], capture_output=True, text=True, timeout=30, check=True)
        head, _, body = done.stdout.replace("\r\n", "\n").partition("\n\n")
        status_line, *lines = head.splitlines()
        headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
        return int(status_line.split()[1]), headers, body

    auth = f"Authorization: Bearer {local_stack.admin_key}"
    for args in (
        [f"{local_stack.origin}/counters/x"],
        ["-H", auth, f"{local_stack.origin}/counters/x"],
        [f"{local_stack.origin}/"],
        ["-H", auth, "-XPOST", f"{local_stack.origin}/events", "-d", '{"counter": "outside"}'],
        [f"{local_stack.origin}/apix/counters/x"],
    ):
        status, headers, body = curl(*args)
        assert (status, json.loads(body)) == (403, {"message": "Forbidden"}), args
        assert headers["x-amzn-errortype"] == "ForbiddenException" and headers["content-type"] == "application/json"

    status, _, body = curl("-H", auth, f"{local_stack.url}/counters/x")
    assert status == 200 and json.loads(body)["count"] == 0
    status, _, body = curl(f"{local_stack.url}/counters/x")  # inside: Tally's own answers, in Chalice's shape
    assert status == 401 and set(json.loads(body)) == {"Code", "Message"}
    for root in (local_stack.url, f"{local_stack.url}/"):  # the root resource, with or without its slash
        status, headers, body = curl(root)
        assert status == 200 and headers["content-type"].startswith("text/html") and "<title>Tally</title>" in body


def test_given_the_stack_then_each_handler_runs_under_its_deployed_limits_and_a_body_over_10_mb_is_refused(
    tmp_path: Path,
) -> None:
    from tools.lambda_limits import GATEWAY_PAYLOAD_BYTES, FunctionLimits, function_limits

    with running_stack(tmp_path) as stack:
        headers = {"Content-Type": "application/json"}
        too_large = stack.post("/events", data=b" " * (GATEWAY_PAYLOAD_BYTES + 1), headers=headers, timeout=60)
        after = stack.post("/events", json={"counter": "after", "id": "a"}, timeout=10)

    assert too_large.status_code == 413 and too_large.json()["Code"] == "BadRequestError"
    assert after.status_code == 201
    started = {
        str(line["message"]).split()[1]: FunctionLimits(line["timeout_s"], line["memory_mb"])
        for line in json_lines_only(stack)
        if str(line.get("message", "")).startswith("handler ") and "timeout_s" in line
    }
    assert {"on_event_records", "on_view_messages", "on_unique_items", "run_scheduled_report"} <= set(started)
    assert started == {name: function_limits("local", name) for name in started}
    assert started["on_unique_items"].memory_mb > 128  # what the stage sets, not Chalice's default
