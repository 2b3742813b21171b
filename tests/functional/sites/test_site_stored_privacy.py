"""What a page view leaves in storage: after page views and a custom event whose URLs are full of
private parts, every DynamoDB table, queue and bucket is read whole and holds none of them
(docs/tracker.md, "What is stored")."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from tests.conftest import create_key
from tests.functional.helpers import REPORT_SETTLE, run_now
from tests.functional.site_helpers import Counting, beacon

ORIGIN = "https://blog.example:8443"
PRIVATE_URL = (
    "https://jdoe:hunter2@blog.example:8443/account?token=s3cret-token&email=alice%40mail.example"
    "#/reset?token=s3cret-token&email=alice@mail.example"
)
REFERRER = "https://jdoe:hunter2@news.example:9443/inbox?token=s3cret-token&email=alice@mail.example"
# Each: user, password, the ports, the token, the e-mail address (raw and percent-encoded).
PRIVATE = ("jdoe", "hunter2", ":8443", ":9443", "s3cret", "alice", "mail.example", "%40")


def everything_stored(aws: Any) -> str:
    """Every item of every table, every message of every queue and every object of every bucket."""
    texts: list[str] = []
    for table in aws.dynamodb.list_tables()["TableNames"]:
        pages = aws.dynamodb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
        texts += [json.dumps(page["Items"], default=lambda b: b.decode("latin-1")) for page in pages]
    for url in aws.sqs.list_queues().get("QueueUrls", []):
        got = aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
        texts += [m["Body"] for m in got.get("Messages", [])]
    for bucket in aws.s3.list_buckets()["Buckets"]:
        for entry in aws.s3.list_objects_v2(Bucket=bucket["Name"]).get("Contents", []):
            texts.append(entry["Key"])
            texts.append(aws.s3.get_object(Bucket=bucket["Name"], Key=entry["Key"])["Body"].read().decode("latin-1"))
    return "\n".join(texts)


def test_given_a_page_url_full_of_private_parts_when_counted_then_no_table_queue_or_bucket_holds_any(
    client: Any, aws: Any, clock: Any
) -> None:
    key = create_key(aws, ["ingest"])  # no origins: a key listing one would hold the port itself
    page = {"url": PRIVATE_URL, "time": clock.now, "referrer": REFERRER, "width": 1280}
    assert beacon(client, key, page, origin=ORIGIN).status_code == 202
    event = {**page, "event": "signup", "dimensions": {"plan": "pro"}}
    assert beacon(client, key, event, origin=ORIGIN).status_code == 202

    queued = everything_stored(aws)
    Counting(client, aws).process()
    clock.advance(REPORT_SETTLE)
    assert run_now(client).status_code == 201
    stored = everything_stored(aws)

    # Counted, under the URL without its private parts: the scan reads what was written.
    counted = "https://blog.example/account#/reset"
    assert client.http.get(f"/views?url={quote(counted, safe='')}").json_body["views"] == 1
    pages = client.http.get("/counters/site:blog.example/breakdown?by=page&window=1d").json_body["values"]
    assert [(entry["value"], entry["count"]) for entry in pages] == [("/account#/reset", 1)]
    assert counted in queued and "/account#/reset" in stored and "news.example" in stored
    assert any(obj.startswith("reports/") for obj in stored.splitlines())
    for private in PRIVATE:
        assert private.lower() not in queued.lower(), private
        assert private.lower() not in stored.lower(), private
