"""The audit over real HTTP: events posted, counted by the stream handler, audited once their
quarter hour has settled; a shortfall made on purpose in the emulator is found, the repair
closes it, and a clean run finds nothing.

The audit compares a partition only after its quarter hour of ingest has closed and settled, so
the stack's clock is moved ahead (`--clock-offset-file`) instead of waiting a quarter hour."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import boto3

from chalicelib.core import keyspace, timebuckets
from chalicelib.counters import audit, audit_items, layout
from tests.e2e.stack import LocalStack, running_stack, wait_for

MINUTE = 60_000
HOUR = 60 * MINUTE
COUNTS_TABLE = "tally-local-counts"  # the local stage's (.chalice/config.json)
COUNTER = "e2e.audited"


def emulator(stack: LocalStack) -> Any:
    return boto3.client(
        "dynamodb",
        endpoint_url=f"http://127.0.0.1:{stack.aws_port}",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def post_and_count(stack: LocalStack, first: int, n: int, expected_total: int, hour_ms: int) -> None:
    """POST n events of COUNTER (ids first.., all in the hour starting hour_ms) and wait until
    the counter shows expected_total."""
    events = [{"counter": COUNTER, "id": f"audit-{first + i}", "time": hour_ms + (first + i) * 1000} for i in range(n)]
    for start in range(0, n, 10):
        response = stack.post("/events", json={"events": events[start : start + 10]})
        assert response.status_code == 201, response.text
    wait_for(
        lambda: stack.get(f"/counters/{COUNTER}", params={"window": "24h"}).json().get("count"),
        60,
        f"{COUNTER} at {expected_total} ({stack.log_path})",
        expected_total.__eq__,
    )


def settle_ingested(stack: LocalStack, offset_file: Path, offset_ms: int) -> int:
    """Move the stack's clock past the end of its current quarter hour and the settle margin
    (AUDIT_SETTLE_MINUTES=1). Returns the new offset."""
    now = int(time.time() * 1000) + offset_ms
    target = now - now % audit.QUARTER_MS + audit.QUARTER_MS + 2 * MINUTE
    offset_ms += target - now
    offset_file.write_text(str(offset_ms))
    return offset_ms


def audit_tallies(dynamodb: Any) -> list[tuple[str, dict[str, Any], str, int]]:
    """Every `applied` number on the stream shards' audit items (counters/audit_items.py): its
    events partition, the item's key, the attribute and its value."""
    items = dynamodb.scan(TableName=COUNTS_TABLE, ConsistentRead=True)["Items"]
    prefix = f"{audit_items.APPLIED}#"
    return [
        (
            f"{i['pk']['S'][len(keyspace.AUDIT_GROUP) :]}#{name[len(prefix) :]}",
            {"pk": i["pk"], "sk": i["sk"]},
            name,
            int(v["N"]),
        )
        for i in items
        if i["pk"]["S"].startswith(keyspace.AUDIT_GROUP)
        for name, v in i.items()
        if name.startswith(prefix)
    ]


def day_bucket(dynamodb: Any, t_ms: int) -> tuple[dict[str, Any], int]:
    day = next(b for b in timebuckets.buckets_for(t_ms) if b.resolution == "day")
    key = layout.bucket_key(COUNTER, day)
    item = dynamodb.get_item(TableName=COUNTS_TABLE, Key=key, ConsistentRead=True)["Item"]
    return key, int(item["n"]["N"])


def test_given_events_counted_over_http_when_audited_then_clean_and_a_made_shortfall_is_found_and_repaired(
    tmp_path: Path,
) -> None:
    offset_file = tmp_path / "clock-offset"
    now = int(time.time() * 1000)
    hour_ms = now - now % HOUR - 2 * HOUR  # one past hour: one hour bucket, one day bucket
    with running_stack(tmp_path, "--clock-offset-file", str(offset_file), AUDIT_SETTLE_MINUTES="1") as stack:
        dynamodb = emulator(stack)
        first = stack.post("/audit").json()
        assert (first["audited"], first["short"]) == (0, []) and first["checkpoint"] is not None

        # Clean: every event posted is counted, the audit compares its partitions and finds nothing.
        post_and_count(stack, 0, 30, 30, hour_ms)
        offset = settle_ingested(stack, offset_file, 0)
        clean = stack.post("/audit")
        assert clean.status_code == 200, clean.text
        assert clean.json()["audited"] > 0 and (clean.json()["shortfall"], clean.json()["short"]) == (0, [])
        assert stack.get("/audit").json() == {"partitions": [], "next": None}

        # A shortfall on purpose: as if two events of one partition had been lost on the way,
        # its applied tally and the counter's day bucket are both lowered by two.
        already = {t[0] for t in audit_tallies(dynamodb)}
        post_and_count(stack, 30, 20, 50, hour_ms)
        tallies = [t for t in audit_tallies(dynamodb) if t[0] not in already]
        short, tally_key, applied, value = max(tallies, key=lambda t: t[3])
        assert value >= 2
        dynamodb.update_item(
            TableName=COUNTS_TABLE,
            Key=tally_key,
            UpdateExpression="ADD #a :minus",
            ExpressionAttributeNames={"#a": applied},
            ExpressionAttributeValues={":minus": {"N": "-2"}},
        )
        key, n = day_bucket(dynamodb, hour_ms)
        assert n == 50
        dynamodb.update_item(
            TableName=COUNTS_TABLE,
            Key=key,
            UpdateExpression="ADD #n :minus",
            ExpressionAttributeNames={"#n": "n"},
            ExpressionAttributeValues={":minus": {"N": "-2"}},
        )
        settle_ingested(stack, offset_file, offset)

        found = stack.post("/audit").json()
        assert found["shortfall"] == 2 and [f["partition"] for f in found["short"]] == [short], found
        assert [(p["partition"], p["shortfall"]) for p in stack.get("/audit").json()["partitions"]] == [(short, 2)]

        repaired = stack.post("/audit/repair", json={"partition": short})
        assert repaired.status_code == 200, repaired.text
        assert repaired.json()["written"] > 0 and repaired.json()["finding"]["shortfall"] == 0, repaired.json()
        assert day_bucket(dynamodb, hour_ms)[1] == 50
        assert stack.get(f"/counters/{COUNTER}", params={"window": "7d"}).json()["count"] == 50

        again = stack.post("/audit").json()
        assert (again["shortfall"], again["short"], again["open"]) == (0, [], 0)
        assert stack.get("/audit").json() == {"partitions": [], "next": None}
