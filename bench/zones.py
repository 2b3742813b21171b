"""Local time: what a 30-day series of local days costs to read against a UTC one, for views and
unique counts, and what quarter-hour sketches add to the write cost of unique counts.

    python -m bench.zones [--per-hour 1000] [--batches 1,10,100,1000,10000]

1. Views: one URL with a view every `--view-minutes` (30) for 45 days, counted by the views handler; the
   views per day of the last 30 local days (GET /views?resolution=day&tz=...), keys and read
   units, each series checked against the views counted by their local date.
2. Unique counts: 31 days of `--per-hour` distinct items per hour; the distinct items per local
   day of the last 30 days (GET /hyperloglog/{name}/histogram?resolution=day&tz=...), and a
   local `yesterday`: keys, read units and bytes read, in UTC and in each zone.
3. Write sweep: batches of 1 to 10,000 items (times within one minute, and spread over 24 hours),
   merged into existing sketches with and without quarter-hour sketches: sketch writes and write
   units per batch, and per 1,000 items added.

Capacity units from item sizes by AWS's rules (bench/metering.py).
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

import numpy as np  # noqa: E402
from moto import mock_aws  # noqa: E402

from bench.metering import Meter, MotoProbe  # noqa: E402
from bench.uniques import random_hashes, table, without_quarters  # noqa: E402
from chalicelib.core import times  # noqa: E402
from chalicelib.core.aws import AwsClients  # noqa: E402
from chalicelib.core.queues import Message  # noqa: E402
from chalicelib.core.settings import Settings  # noqa: E402
from chalicelib.uniques import api as uniques_api  # noqa: E402
from chalicelib.uniques import batches as uniques_batches  # noqa: E402
from chalicelib.views import api as views_api  # noqa: E402
from chalicelib.views import batches as views_batches  # noqa: E402
from chalicelib.views.messages import to_message  # noqa: E402
from chalicelib.views.validation import View  # noqa: E402
from tools import resources  # noqa: E402

NOW = times.parse("2026-11-18T11:06:40Z")
ZONES = ["UTC", "America/New_York", "Europe/Berlin", "Asia/Kolkata", "Asia/Kathmandu", "Pacific/Chatham"]
MINUTE_MS, HOUR_MS, DAY_MS = 60_000, 3_600_000, 86_400_000
URL = "https://bench.example/zones"


def metered(clients: AwsClients, settings: Settings) -> tuple[Meter, Any]:
    meter = Meter(MotoProbe(clients.dynamodb, region=settings.aws_region))
    return meter, meter.attach(AwsClients(settings).dynamodb)


def series_params(zone: str) -> dict[str, str]:
    return {"start": times.iso(NOW - 30 * DAY_MS), "end": times.iso(NOW), "resolution": "day", "tz": zone}


def view_series(clients: AwsClients, settings: Settings, every_minutes: int) -> list[list[str]]:
    """A view every `every_minutes` over 45 days (the view horizon lets a backfill count them all)."""
    stamps = list(range(NOW - 45 * DAY_MS, NOW, every_minutes * MINUTE_MS))
    view_settings = Settings.from_env({"VIEW_HORIZON_SECONDS": str(60 * 86400)})
    for start in range(0, len(stamps), 1000):
        messages = [
            Message(str(i), f"r{i}", to_message(View(URL, t, f"c{i}")))
            for i, t in enumerate(stamps[start : start + 1000], start)
        ]
        views_batches.apply_messages(clients.dynamodb, clients.sqs, view_settings, messages, NOW)
    rows = []
    for zone in ZONES:
        meter, dynamodb = metered(clients, settings)
        answer = views_api.windowed_count(dynamodb, settings, {"url": URL, **series_params(zone)}, NOW)
        by_day = Counter(datetime.fromtimestamp(t / 1000, ZoneInfo(zone)).date() for t in stamps)
        exact = all(by_day[datetime.fromisoformat(b["start"]).date()] == b["views"] for b in answer["buckets"])
        usage = meter.total()
        rows.append(
            [
                zone,
                str(len(answer["buckets"])),
                str(answer["keys_read"]),
                str(usage.requests),
                f"{usage.read_units:g}",
                "yes" if exact else "NO",
            ]
        )
    return rows


def populate(clients: AwsClients, settings: Settings, per_hour: int) -> None:
    """31 days of `per_hour` distinct items an hour for name "local", at 4 times an hour."""
    rng = np.random.default_rng(31)
    last_hour = NOW // HOUR_MS
    for day in range(32):
        messages = []
        for h in range(24):
            hour = last_hour - day * 24 - h
            values = random_hashes(rng, per_hour).astype(">u8").tobytes()
            step = 8 * max(1, per_hour // 4)
            for k in range(0, len(values), step):
                t = hour * HOUR_MS + (k // step) * 15 * MINUTE_MS + MINUTE_MS
                for j in range(k, min(k + step, len(values)), 8 * uniques_batches.MAX_ITEMS):
                    raw = values[j : min(j + 8 * uniques_batches.MAX_ITEMS, k + step)]
                    messages.append(Message(f"p-{day}-{h}-{j}", "", uniques_batches.message_body("local", raw, t)))
        uniques_batches.apply_messages(clients.dynamodb, settings, messages, NOW)


def unique_series(clients: AwsClients, settings: Settings) -> list[list[str]]:
    rows = []
    for zone in ZONES:
        meter, dynamodb = metered(clients, settings)
        answer = uniques_api.windowed_histogram(dynamodb, settings, "local", series_params(zone), NOW)
        series = meter.total()
        meter, dynamodb = metered(clients, settings)
        day = uniques_api.windowed_count(dynamodb, settings, ["local"], {"window": "yesterday", "tz": zone}, NOW)
        one = meter.total()
        rows.append(
            [
                zone,
                str(len(answer["buckets"])),
                str(answer["keys_read"]),
                str(series.requests),
                f"{series.read_units:g}",
                str(day["keys_read"]),
                f"{one.read_units:g}",
            ]
        )
    return rows


def write_sweep(clients: AwsClients, settings: Settings, sizes: list[int]) -> list[list[str]]:
    rng = np.random.default_rng(7)
    rows = []
    for spread in ("1 minute", "24 hours"):
        for n in sizes:
            for design, run in (("before: day + hour", without_quarters), ("with quarters", lambda f: f())):
                name = f"sweep-{spread.split()[1]}-{n}-{design[:4]}"

                def batch(tag: str, n: int = n, name: str = name, spread: str = spread) -> list[Message]:
                    values = random_hashes(rng, n).astype(">u8").tobytes()
                    per = min(uniques_batches.MAX_ITEMS, max(1, n // 24)) if spread == "24 hours" else 500
                    out = []
                    for k in range(0, n, per):
                        t = (
                            NOW - ((k // per) % 24) * HOUR_MS
                            if spread == "24 hours"
                            else NOW - random.randrange(60_000)
                        )
                        raw = values[k * 8 : (k + per) * 8]
                        out.append(Message(f"{tag}-{k}", "", uniques_batches.message_body(name, raw, t)))
                    return out

                run(lambda: uniques_batches.apply_messages(clients.dynamodb, settings, batch("warm"), NOW))
                meter, metered_db = metered(clients, settings)
                run(lambda db=metered_db: uniques_batches.apply_messages(db, settings, batch("measured"), NOW))
                writes = meter.total("PutItem")
                rows.append(
                    [
                        spread,
                        f"{n:,}",
                        design,
                        str(writes.items_written),
                        f"{writes.write_units:g}",
                        f"{writes.write_units * 1000 / n:,.1f}",
                    ]
                )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-hour", type=int, default=1_000)
    parser.add_argument("--view-minutes", type=int, default=30)
    parser.add_argument("--batches", default="1,10,100,1000,10000")
    args = parser.parse_args(argv)
    random.seed(0)
    settings = Settings.from_env({})
    with mock_aws():
        clients = AwsClients(settings)
        resources.ensure(
            clients.dynamodb, clients.sqs, clients.s3, resources.for_settings(settings), settings.aws_region
        )
        views = view_series(clients, settings, args.view_minutes)
        print(table("views", ["zone", "days", "keys", "requests", "RCU", "equals brute force"], views), flush=True)
        populate(clients, settings, args.per_hour)
        print("views done", flush=True)
        uniques = unique_series(clients, settings)
        sweep = write_sweep(clients, settings, [int(n) for n in args.batches.split(",")])
    print(
        table(
            f"Views: 30 local days of one URL (a view every {args.view_minutes} minutes), one read",
            ["zone", "days", "keys", "requests", "RCU", "equals brute force"],
            views,
        )
    )
    print(
        table(
            f"Unique counts: 30 local days of {args.per_hour:,} distinct items an hour, and a local yesterday",
            ["zone", "days", "series keys", "requests", "series RCU", "yesterday keys", "yesterday RCU"],
            uniques,
        )
    )
    print(
        table(
            "Unique-count writes: one batch into existing sketches",
            ["item times", "items", "design", "sketch writes", "WCU", "WCU per 1,000 items"],
            sweep,
        )
    )


if __name__ == "__main__":
    main()
