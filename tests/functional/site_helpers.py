"""Sending tally.js's beacons through the API and running the handlers that count them."""

from __future__ import annotations

import json
from typing import Any

from chalicelib.core.settings import Settings
from tests.functional import stream_fixtures
from tests.functional.helpers import invoke

SETTINGS = Settings()
CHROME = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36"
FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
GOOGLEBOT = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"


def beacon(client: Any, key: str, body: dict[str, Any], agent: str = CHROME, origin: str | None = None) -> Any:
    headers = {"Content-Type": "text/plain;charset=UTF-8", "User-Agent": agent}
    if origin:
        headers["Origin"] = origin
    return client.http.with_key(None).post(f"/beacon/pageview?key={key}", headers=headers, body=json.dumps(body))


def left_behind(aws: Any) -> int:
    """Queued messages and stored events: what a counted beacon leaves (0 after a refused one)."""
    total = 0
    for queue in (SETTINGS.views_queue, SETTINGS.uniques_queue):
        url = aws.sqs.get_queue_url(QueueName=queue)["QueueUrl"]
        attributes = aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
        total += int(attributes["Attributes"]["ApproximateNumberOfMessages"])
    return total + len(aws.dynamodb.scan(TableName=SETTINGS.events_table)["Items"])


class Counting:
    """Runs the background handlers as Lambda would: each queued message and each stored event
    delivered once (`process`), or delivered again (`redeliver`)."""

    def __init__(self, client: Any, aws: Any) -> None:
        self.client, self.aws = client, aws
        self.delivered: set[str] = set()
        self.last: list[dict[str, Any]] = []

    def _drain(self, queue: str, handler: str) -> None:
        url = self.aws.sqs.get_queue_url(QueueName=queue)["QueueUrl"]
        while True:
            got = self.aws.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            if not got:
                return
            records = [
                {"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                 "attributes": {}, "messageAttributes": {}, "eventSource": "aws:sqs"}
                for m in got
            ]  # fmt: skip
            invoke(self.client, handler, {"Records": records})
            for m in got:
                self.aws.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])

    def process(self) -> None:
        self._drain(SETTINGS.views_queue, "on_view_messages")
        self._drain(SETTINGS.uniques_queue, "on_unique_items")
        fresh = [
            r
            for r in stream_fixtures.stored_event_records(self.aws.dynamodb)
            if r["dynamodb"]["Keys"]["sk"]["S"] not in self.delivered
        ]
        if fresh:
            invoke(self.client, "on_event_records", stream_fixtures.lambda_event(fresh))
            self.delivered |= {r["dynamodb"]["Keys"]["sk"]["S"] for r in fresh}
            self.last = fresh

    def redeliver(self) -> None:
        """The last stream batch once more, as Lambda may deliver it."""
        invoke(self.client, "on_event_records", stream_fixtures.lambda_event(self.last))
