"""Day series in a time zone against the same series in UTC: what a local day costs to read.

    python -m bench.local_time [--days 30,7]

The workload: one counter over the 31 days before now, dense (4 events in every hour) and sparse
(an event every 5 hours, so most days keep their minutes inline in the day item), counted
through the stream handler. Then GET /counters/{counter}/histogram?resolution=day for the last
N local days (window=Nd&tz=...) in UTC, Europe/Berlin (+01:00) and Asia/Kathmandu (+05:45),
metered, each answer checked against every event's local date:

- utc: the stored day items themselves (one Query);
- local: each local day the minute plan of its UTC minutes (reads.histogram), from one Query of
  the hour items and one of the day items once the hours needed are dense, else one batch;
- local by key: the same plan read by BatchGetItem of every key (reads.DENSE_HOUR_KEYS raised
  out of reach), the design the Query replaces.

Printed per series: requests, keys asked by BatchGetItem, items a Query evaluated, and read
units (eventually consistent, bench/metering.py).
"""

from __future__ import annotations

import argparse
import random
from collections import Counter
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from bench import env

env.prepare()

from bench.counters import deliver, stream_records_of  # noqa: E402
from bench.metering import Meter, MotoProbe  # noqa: E402
from chalicelib.core import times  # noqa: E402
from chalicelib.counters import reads  # noqa: E402
from chalicelib.events import ingest as events  # noqa: E402

NOW = 1_795_000_000_000  # 2026-11-18
COUNTER = "orders"
ZONES = ("UTC", "Europe/Berlin", "Asia/Kathmandu")
BATCH = 500


def workload(dense: bool, seed: int = 1) -> list[int]:
    rng = random.Random(seed)
    start = NOW - 31 * times.DAY_MS
    if dense:
        return [start + h * times.HOUR_MS + rng.randrange(times.HOUR_MS) for h in range(31 * 24) for _ in range(4)]
    return [start + i * 5 * times.HOUR_MS + rng.randrange(times.HOUR_MS) for i in range(31 * 24 // 5)]


def count(dynamodb: Any, settings: Any, event_times: list[int]) -> None:
    from boto3.dynamodb.types import TypeSerializer

    serializer = TypeSerializer()
    items = []
    for i, t in enumerate(sorted(event_times)):
        event = events.Event(COUNTER, f"gen-{i}", t, 40 * 86400)
        items.append({k: serializer.serialize(v) for k, v in events.to_item(event, t, settings).items()})
    records = stream_records_of(items)
    for start in range(0, len(records), BATCH):
        deliver(dynamodb, settings, records[start : start + BATCH], NOW)


class KeysAsked:
    """Counts the keys every BatchGetItem of a client asks for (botocore hook)."""

    def __init__(self, client: Any) -> None:
        self.keys = 0
        client.meta.events.register("before-parameter-build.dynamodb.BatchGetItem", self._count)

    def _count(self, params: dict[str, Any], **_: Any) -> None:
        self.keys += sum(len(r["Keys"]) for r in params["RequestItems"].values())


def series(
    clients: Any, settings: Any, probe: Any, zone_name: str, days: int, design: str, event_times: list[int]
) -> tuple[dict[str, float], bool]:
    from chalicelib.core.aws import AwsClients

    zone = ZoneInfo(zone_name)
    dynamodb = AwsClients(settings).dynamodb
    meter = Meter(probe)
    meter.attach(dynamodb)
    asked = KeysAsked(dynamodb)
    last = NOW // times.MINUTE_MS
    first = last - days * 1440 + 1
    dense_keys = reads.DENSE_HOUR_KEYS
    if design == "local by key":
        reads.DENSE_HOUR_KEYS = 10**9
    try:
        answer = reads.histogram(
            dynamodb, settings, COUNTER, first, last, "day", NOW, None, None if design == "utc" else zone
        )
    finally:
        reads.DENSE_HOUR_KEYS = dense_keys
    truth = Counter(datetime.fromtimestamp(t / 1000, zone).date() for t in event_times)
    right = all(
        b["count"] == truth[datetime.fromisoformat(b["start"]).astimezone(zone).date()] for b in answer["buckets"]
    )
    total = meter.total()
    usage = {"requests": total.requests, "keys": asked.keys, "queried": meter.total("Query").items_read}
    return {**usage, "rcu": total.read_units}, right


def run(days_list: list[int]) -> None:
    from moto import mock_aws

    from chalicelib.core.aws import AwsClients
    from chalicelib.core.settings import Settings
    from tools import resources

    header = f"{'workload':<8}{'days':>5}  {'zone':<15}{'design':<14}{'requests':>9}{'keys':>7}{'queried':>9}{'rcu':>8}  right"
    print(header)
    print("-" * len(header))
    for dense in (True, False):
        with mock_aws():
            settings = Settings.from_env({})
            clients = AwsClients(settings)
            resources.ensure(
                clients.dynamodb, clients.sqs, clients.s3, resources.for_settings(settings), settings.aws_region
            )
            event_times = workload(dense)
            count(clients.dynamodb, settings, event_times)
            probe = MotoProbe(clients.dynamodb, region=settings.aws_region)
            for days in days_list:
                for zone_name in ZONES:
                    designs = ("utc",) if zone_name == "UTC" else ("local", "local by key")
                    for design in designs:
                        usage, right = series(clients, settings, probe, zone_name, days, design, event_times)
                        print(
                            f"{'dense' if dense else 'sparse':<8}{days:>5}  {zone_name:<15}{design:<14}"
                            f"{usage['requests']:>9.0f}{usage['keys']:>7.0f}{usage['queried']:>9.0f}"
                            f"{usage['rcu']:>8.1f}  {'yes' if right else 'NO'}",
                            flush=True,
                        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", default="30,7", help="series lengths in days, comma-separated")
    args = parser.parse_args(argv)
    run([int(d) for d in args.days.split(",")])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
