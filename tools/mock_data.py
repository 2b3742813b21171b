"""Random events for K counters over the last N hours, through the API or straight into the table.

    python -m tools.mock_data --hours 30 --counters 3 --per-hour 20-100 --api http://127.0.0.1:8000/api [--key KEY]
    python -m tools.mock_data --direct --stage local     # BatchWriteItem into the events table

Counters are named <prefix>-1..K (default jobs.provider-1..3, as in the counting post). Through
the API, events are posted in batches of 25 with a key that has the ingest scope (default:
$TALLY_KEY, else the local admin key in .tally/local-admin-key); directly, they are written as the API would
write them (ingest time now, the event's own time spread over the hours), which the stream
handler then counts. Prints, per counter, how many events were sent in the last 24 hours.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Iterable
from typing import Any

import requests
from tqdm import tqdm

from chalicelib.core import times
from tools import stage as stages

HOUR_MS = times.HOUR_MS


def generate(
    hours: int, counters: list[str], per_hour: tuple[int, int], now_ms: int, rng: random.Random
) -> list[dict[str, Any]]:
    events = []
    for hour in range(hours):
        hour_start = now_ms - (hour + 1) * HOUR_MS
        for _ in range(rng.randint(*per_hour)):
            events.append({"counter": rng.choice(counters), "time": hour_start + rng.randrange(HOUR_MS)})
    events.sort(key=lambda e: e["time"])
    return events


def chunks(items: list[dict[str, Any]], size: int) -> Iterable[list[dict[str, Any]]]:
    return (items[i : i + size] for i in range(0, len(items), size))


def default_key() -> str | None:
    from tools.keys import LOCAL_ADMIN_KEY

    if os.environ.get("TALLY_KEY"):
        return os.environ["TALLY_KEY"]
    return LOCAL_ADMIN_KEY.read_text().strip() if LOCAL_ADMIN_KEY.exists() else None


def send_api(api: str, events: list[dict[str, Any]], key: str | None) -> None:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with tqdm(total=len(events), unit="event", desc="POST /events") as bar:
        for batch in chunks(events, 25):
            response = requests.post(f"{api.rstrip('/')}/events", json={"events": batch}, headers=headers, timeout=30)
            if response.status_code != 201:
                raise SystemExit(f"POST /events answered {response.status_code}: {response.text}")
            bar.update(len(batch))


def send_direct(stage: str, events: list[dict[str, Any]]) -> None:
    from chalicelib.core.aws import AwsClients
    from chalicelib.events import ingest as event_module

    settings = stages.export(stage)
    clients = AwsClients(settings)
    now = int(time.time() * 1000)
    with tqdm(total=len(events), unit="event", desc=f"BatchWriteItem {settings.events_table}") as bar:
        for batch in chunks(events, 25):
            parsed = event_module.parse_body({"events": batch}, now, settings)
            event_module.store(clients.dynamodb, settings, parsed, now)
            bar.update(len(batch))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hours", type=int, default=30)
    parser.add_argument("--counters", type=int, default=3)
    parser.add_argument("--prefix", default="jobs.provider")
    parser.add_argument("--per-hour", default="20-100", help="events per hour, a number or a range low-high")
    parser.add_argument(
        "--retention", type=int, default=None, help="seconds each event is counted (default: the service's)"
    )
    parser.add_argument("--seed", type=int, default=None)
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "--api",
        default=f"http://127.0.0.1:8000/{stages.api_gateway_stage('local')}",
        help="the API's base URL, stage path included",
    )
    target.add_argument(
        "--direct", action="store_true", help="write to the events table (AWS_ENDPOINT_URL for the emulator)"
    )
    parser.add_argument("--stage", default="local", help="with --direct: whose table names to use")
    parser.add_argument("--key", default=None, help="an ingest key (default: $TALLY_KEY or .tally/local-admin-key)")
    args = parser.parse_args(argv)

    low, _, high = args.per_hour.partition("-")
    per_hour = (int(low), int(high or low))
    rng = random.Random(args.seed)
    counters = [f"{args.prefix}-{i}" for i in range(1, args.counters + 1)]
    now = int(time.time() * 1000)
    events = generate(args.hours, counters, per_hour, now, rng)
    if args.retention:
        for event in events:
            event["retention"] = args.retention
    if args.direct:
        send_direct(args.stage, events)
    else:
        send_api(args.api, events, args.key or default_key())
    day_ago = now - 24 * HOUR_MS
    for counter in counters:
        recent = sum(
            1 for e in events if e["counter"] == counter and e["time"] // times.MINUTE_MS > day_ago // times.MINUTE_MS
        )
        print(f"{counter}: {recent} events in the last 24 hours")
    return 0


if __name__ == "__main__":
    sys.exit(main())
