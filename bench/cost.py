"""What a million events cost, all in: Tally against the seed designs, in dollars.

    python -m bench.cost [--json] [--events 2000] [--views 2000] [--minutes 3] [--workloads views ...]

Three workloads, each run on moto at a small volume and extrapolated linearly to one million
events (every cost below grows in proportion to the events; what does not, such as a queue's idle
polling, the audit's and the report's schedules or storage, is left out and said so):

- counters: a server sending batches of 25 events (about 150 bytes each) to 30 counters.
  Tally: one `POST /events` per batch (API Gateway, the API Lambda, the events table), the
  stream handler in batches of STREAM_BATCH_SIZE, the report job reading the events once and
  the audit comparing every events partition. Seed (counting-on-dynamodb.md, bench.counters'
  model): the same requests, one PutItem per event, two UpdateItem calls per event.
- views: browsers sending one page view each (`POST /views`, 1,000 URLs, 10% delivered twice).
  Tally: the API Lambda sends to the views queue; the views handler in batches of
  VIEWS_BATCH_SIZE (bench.views' model); and the same views through the tracker's Lambda
  function URL (`tally, function URL`): no API Gateway request, the `beacon_url` function's
  invocation and CPU time (turning the URL's event into the route's request and the answer back
  included) at its configured memory, the same queue and handler. Both fronts check the page
  views' one tracker key against its rate (access/rates.py) at each delivery's arrival, in one
  process each: a write for each request past the process's allowance in its second (the resends,
  which arrive in the second of the view before them). Two more rows price what a site's page
  view adds behind the function URL: `+ realtime` its visitor's minute sketch (the unique-count
  handler merges each batch's visitors into the sketch of each minute the batch holds, in
  batches of its 60 s batching window: sites/api.py), and `+ realtime + goal` that and every page view converting on a goal
  (the site's settings read once a minute per process, one more uniques message, and the goal's
  sketches merged by the uniques handler in batches of its 60 s batching window: sites/beacon.py).
  Seed (accurate-counters-dynamodb.md): API
  Gateway sends to SQS directly, a Lambda with batches of 10 writes one transaction per view.
- uniques: 10,000 items a minute into one unique count. Tally: requests of 500 items, one
  message each on the uniques queue, one handler batch a minute. Seed
  (serverless-hyperloglog.md): one request per item, put on a Kinesis stream, one Lambda batch a
  minute reading and writing a pickled sketch (bench.uniques' model).

Units: DynamoDB read and write units from item sizes by AWS's rules (bench.metering); Lambda
requests are invocations, GB-seconds the CPU time each handler call measured here (including
moto's in-process work for its DynamoDB calls, so an upper bound), rounded up to the
millisecond per invocation, times the memory the handler is configured with
(.chalice/config.json, stage dev; Chalice's default 128 MB where none is set); SQS requests
are the messages sent plus what Lambda's poller does per batch (one ReceiveMessage and one
DeleteMessageBatch per 10 messages); S3 puts the report objects (two per hourly report, at the
stated rate).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import env

env.prepare()

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from bench import counters as counters_bench  # noqa: E402
from bench import uniques as uniques_bench  # noqa: E402
from bench import views as views_bench  # noqa: E402
from bench.metering import Meter, MotoProbe, item_size  # noqa: E402
from chalicelib.access import policy, rates  # noqa: E402
from chalicelib.core.aws import AwsClients  # noqa: E402
from chalicelib.core.queues import Message  # noqa: E402
from chalicelib.core.settings import Settings  # noqa: E402
from chalicelib.counters import audit, audit_runs  # noqa: E402
from chalicelib.events import ingest as events  # noqa: E402
from chalicelib.reports import runs as report_runs  # noqa: E402
from chalicelib.sites import beacon, function_url, names  # noqa: E402
from chalicelib.sites import settings as site_settings  # noqa: E402
from chalicelib.uniques import api as uniques_api  # noqa: E402
from chalicelib.uniques import batches as uniques_batches  # noqa: E402
from chalicelib.uniques import sketches  # noqa: E402
from chalicelib.views import api as views_api  # noqa: E402
from chalicelib.views import batches as views_batches  # noqa: E402
from chalicelib.views import messages as view_messages  # noqa: E402
from chalicelib.views import validation as view_validation  # noqa: E402
from chalicelib.views.validation import View  # noqa: E402
from tools import function_url as url_tools  # noqa: E402
from tools import resources  # noqa: E402

MILLION = 1_000_000

# -- AWS's published on-demand prices, US East (N. Virginia), us-east-1 --------------------------
# As listed on 2025-01-31 (DynamoDB's on-demand prices as reduced on 2024-11-01), from:
#   https://aws.amazon.com/dynamodb/pricing/on-demand/   (write and read request units)
#   https://aws.amazon.com/lambda/pricing/               (x86 duration per GB-second, requests)
#   https://aws.amazon.com/sqs/pricing/                  (standard queue requests, past the free tier)
#   https://aws.amazon.com/s3/pricing/                   (S3 Standard PUT, COPY, POST, LIST)
#   https://aws.amazon.com/api-gateway/pricing/          (REST API requests, first 333 million)
#   https://aws.amazon.com/kinesis/data-streams/pricing/ (provisioned: PUT payload units, shard hours)
PRICES_AS_OF = "2025-01-31"
PRICES_REGION = "us-east-1"
PRICES = {
    "write_request_unit": 0.625 / MILLION,
    "read_request_unit": 0.125 / MILLION,
    "lambda_gb_second": 0.0000166667,
    "lambda_request": 0.20 / MILLION,
    "sqs_request": 0.40 / MILLION,
    "s3_put": 0.005 / 1000,
    "api_gateway_request": 3.50 / MILLION,
    "kinesis_put_payload_unit": 0.014 / MILLION,
    "kinesis_shard_hour": 0.015,
}
CHALICE_DEFAULT_MEMORY_MB = 128
CONFIG = Path(__file__).resolve().parent.parent / ".chalice" / "config.json"
SQS_POLL_BATCH = 10  # Lambda's poller receives and deletes up to 10 messages per request
COUNTERS_PER_SECOND = 100  # the counters workload's rate: it sets the report runs per million
T0 = 1_795_000_000_000
SEED_EVENTS = "seed-events"
# The item key the api handler reads once per process from Secrets Manager: one GetSecretValue a
# cold start, nothing per request, so the bench hands the handlers a fixed key.
ITEM_KEY = b"bench-item-key-" + bytes(range(32))
FUNCTION_URL = "tally, function URL"  # the browsers workload's design behind the tracker's function URL
REALTIME = f"{FUNCTION_URL} + realtime"
WITH_GOAL = f"{FUNCTION_URL} + realtime + goal"
BENCH_SITE = "blog.example"
# The one tracker key every page of the browsers workload carries, at its scope's default rate.
TRACKER_KEY_ID, TRACKER_RATE = "0123456789abcdef", policy.DEFAULT_RATES[policy.TRACKER]


def memory_mb(function: str, stage: str = "dev") -> int:
    """The memory a handler is configured with: per function, then stage, then app; else Chalice's default."""
    config = json.loads(CONFIG.read_text())
    stage_config = config.get("stages", {}).get(stage, {})
    for scope in (stage_config.get("lambda_functions", {}).get(function, {}), stage_config, config):
        if "lambda_memory_size" in scope:
            return int(scope["lambda_memory_size"])
    return CHALICE_DEFAULT_MEMORY_MB


@dataclass
class Bill:
    """One design's work for one workload, per million events."""

    api_requests: float = 0
    write_units: float = 0
    read_units: float = 0
    lambda_requests: float = 0
    lambda_gb_seconds: float = 0
    sqs_requests: float = 0
    s3_puts: float = 0
    kinesis_put_units: float = 0
    kinesis_shard_hours: float = 0
    dollars: dict[str, float] = field(default_factory=dict)

    def scale(self, factor: float) -> None:
        for name in (
            "api_requests",
            "write_units",
            "read_units",
            "lambda_requests",
            "lambda_gb_seconds",
            "sqs_requests",
            "s3_puts",
            "kinesis_put_units",
            "kinesis_shard_hours",
        ):
            setattr(self, name, getattr(self, name) * factor)

    def price(self) -> float:
        self.dollars = {
            "dynamodb": self.write_units * PRICES["write_request_unit"] + self.read_units * PRICES["read_request_unit"],
            "lambda": self.lambda_requests * PRICES["lambda_request"]
            + self.lambda_gb_seconds * PRICES["lambda_gb_second"],
            "sqs": self.sqs_requests * PRICES["sqs_request"],
            "s3": self.s3_puts * PRICES["s3_put"],
            "api_gateway": self.api_requests * PRICES["api_gateway_request"],
            "kinesis": self.kinesis_put_units * PRICES["kinesis_put_payload_unit"]
            + self.kinesis_shard_hours * PRICES["kinesis_shard_hour"],
        }
        return self.total

    @property
    def total(self) -> float:
        return sum(self.dollars.values())


class Handler:
    """Invocations of one Lambda handler and their CPU time, billed per started millisecond."""

    def __init__(self, function: str) -> None:
        self.memory_gb = memory_mb(function) / 1024
        self.invocations = 0
        self.billed_ms = 0

    @contextmanager
    def invocation(self) -> Iterator[None]:
        began = time.process_time()
        try:
            yield
        finally:
            self.invocations += 1
            self.billed_ms += math.ceil((time.process_time() - began) * 1000)

    def charge(self, bill: Bill) -> None:
        bill.lambda_requests += self.invocations
        bill.lambda_gb_seconds += self.billed_ms / 1000 * self.memory_gb


class SqsCalls:
    """Requests a client makes to SQS (botocore hook)."""

    def __init__(self) -> None:
        self.requests = 0

    def attach(self, client: Any) -> Any:
        def count(**_: Any) -> None:
            self.requests += 1

        client.meta.events.register("before-parameter-build.sqs.*", count)
        return client


def poller_requests(messages: int) -> int:
    """What Lambda's SQS poller does for `messages` delivered: receive and delete, 10 at a time."""
    return 2 * math.ceil(messages / SQS_POLL_BATCH)


def charge(bill: Bill, meter: Meter) -> None:
    usage = meter.total()
    bill.write_units += usage.write_units
    bill.read_units += usage.read_units


@contextmanager
def stack() -> Iterator[tuple[Settings, AwsClients, MotoProbe]]:
    with mock_aws():
        settings = Settings.from_env({})
        clients = AwsClients(settings)
        resources.ensure(
            clients.dynamodb, clients.sqs, clients.s3, resources.for_settings(settings), settings.aws_region
        )
        yield settings, clients, MotoProbe(clients.dynamodb, region=settings.aws_region)


# -- counters -------------------------------------------------------------------------------------


def server_event(rng: random.Random, counter: str, time_ms: int) -> dict[str, Any]:
    """About 150 bytes as JSON: a counter, a time and a few attributes."""
    return {
        "counter": counter,
        "time": time_ms,
        "attributes": {
            "region": rng.choice(["eu-west-1", "us-east-1"]),
            "sku": f"SKU-{rng.randrange(10**6):06d}",
            "customer": f"customer-{rng.randrange(10**5):05d}",
            "amount": rng.randrange(100, 10**5) / 100,
        },
    }


def counters_workload(n: int) -> tuple[dict[str, Bill], dict[str, Any]]:
    rng = random.Random(21)
    names = [f"jobs.provider-{k:02d}" for k in range(30)]
    interval = 1000 // COUNTERS_PER_SECOND
    bodies = [
        {"events": [server_event(rng, rng.choice(names), T0 + (r * 25 + i) * interval) for i in range(25)]}
        for r in range(n // 25)
    ]
    sent = sum(len(b["events"]) for b in bodies)
    event_bytes = sum(len(json.dumps(e, separators=(",", ":"))) for b in bodies for e in b["events"]) / sent
    tally, seed = Bill(), Bill()
    with stack() as (settings, clients, probe):
        seed_tables = resources.Resources(tables=(resources.Table(SEED_EVENTS, stream=True),), queues=(), buckets=())
        resources.ensure(clients.dynamodb, clients.sqs, clients.s3, seed_tables, settings.aws_region)
        clients.dynamodb.create_table(
            TableName=counters_bench.SEED_TABLE,
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        )
        # Tally: the API, then the stream handler over what the API stored
        api, ingest = Handler("api_handler"), Meter(probe)
        client = ingest.attach(AwsClients(settings).dynamodb)
        for r, body in enumerate(bodies):
            now = T0 + (r + 1) * 25 * interval
            with api.invocation():
                events.store(client, settings, events.parse_body(body, now, settings), now)
        stored = sorted(counters_bench.scan_all(clients.dynamodb, settings.events_table), key=lambda i: i["sk"]["S"])
        stream, counting = Handler("on_event_records"), Meter(probe)
        client = counting.attach(AwsClients(settings).dynamodb)
        end = T0 + sent * interval + 1000
        for batch in counters_bench.stream_batches(stored, settings.stream_batch_size):
            with stream.invocation():
                counters_bench.deliver(client, settings, batch, end)
        # The report job reads every event once; the audit compares every partition once.
        report, later = Handler("run_scheduled_report"), Meter(probe)
        client = later.attach(AwsClients(settings).dynamodb)
        with report.invocation():
            whole = report_runs.Budget(events=sent * 2, queries=10**9)  # the whole range in one report
            reported = report_runs.read_report(client, settings, T0, end, whole, end).events
        auditor = Handler("run_audit")
        with auditor.invocation():
            first = T0 - T0 % audit.QUARTER_MS
            for quarter in range(first, end, audit.QUARTER_MS):
                for pk in audit.partitions(quarter, settings.event_write_shards):
                    audit_runs.compare(client, settings, pk)
        for handler in (api, stream):
            handler.charge(tally)
        for meter in (ingest, counting, later):
            charge(tally, meter)
        tally.api_requests = len(bodies)
        events_table_units = ingest.total().write_units
        # Seed: one PutItem per event behind the same requests, two UpdateItem calls per event.
        seed_api, seed_ingest = Handler("api_handler"), Meter(probe)
        client = seed_ingest.attach(AwsClients(settings).dynamodb)
        for body in bodies:
            with seed_api.invocation():
                for item in _seed_items(body, settings):
                    client.put_item(TableName=SEED_EVENTS, Item=item)
        seed_stream, seed_counting = Handler("on_event_records"), Meter(probe)
        client = seed_counting.attach(AwsClients(settings).dynamodb)
        records = [_seed_items(b, settings) for b in bodies]
        for batch in counters_bench.stream_batches([i for r in records for i in r], settings.stream_batch_size):
            with seed_stream.invocation():
                counters_bench.seed_apply(client, batch)
        for handler in (seed_api, seed_stream):
            handler.charge(seed)
        for meter in (seed_ingest, seed_counting):
            charge(seed, meter)
        seed.api_requests = len(bodies)
    per_million = MILLION / sent
    hours = MILLION / COUNTERS_PER_SECOND / 3600
    runs = math.ceil(hours * 60 / settings.report_interval_minutes)
    for bill in (tally, seed):
        bill.scale(per_million)
    # Report and audit runs are scheduled: their invocations, and the report's two S3 objects,
    # come per run at the stated rate; their reads grow with the events (scaled above).
    tally.s3_puts = 2 * runs
    tally.lambda_requests += runs + math.ceil(hours * 60 / settings.audit_interval_minutes)
    tally.lambda_gb_seconds += (
        (report.billed_ms * report.memory_gb + auditor.billed_ms * auditor.memory_gb) / 1000 * (per_million)
    )
    notes = {
        "events simulated": sent,
        "event bytes (JSON)": round(event_bytes),
        "events reported": reported,
        "events-table write units per 1,000 events": round(events_table_units * 1000 / sent, 1),
        "rate, events/s (report runs)": COUNTERS_PER_SECOND,
    }
    return {"tally": tally, "seed": seed}, notes


def _seed_items(body: dict[str, Any], settings: Settings) -> list[dict[str, Any]]:
    """The seed's event items: one per event, as the one-item-per-event layout stores it."""
    return [
        {k: counters_bench._SERIALIZER.serialize(v) for k, v in events.to_item(e, e.time_ms, settings).items()}
        for e in events.parse_body(body, T0 + 10**9, settings)
    ]


# -- the events table alone: packed against one item per event ------------------------------------

INGEST_REQUEST_SIZES = (1, 5, 25)
INGEST_EVENT_BYTES = (150, 1000, 16_000)


def sized_event(rng: random.Random, counter: str, target_bytes: int) -> dict[str, Any]:
    """An event whose JSON is about `target_bytes` long (a note pads the attributes)."""
    body = server_event(rng, counter, T0)
    pad = target_bytes - len(json.dumps(body, separators=(",", ":")))
    if pad > 10:
        body["attributes"]["note"] = "x" * (pad - 10)
    return body


def ingest_units(n: int) -> list[dict[str, Any]]:
    """Write units of the events table per 1,000 events, from stored item sizes, for requests of
    1, 5 and 25 events of about 150 bytes, 1 KB and 16 KB: as stored now (events/packs.py) and
    as stored before packs (one item per event, the one-event layout), in the same run."""
    rows = []
    rng = random.Random(3)
    for event_bytes in INGEST_EVENT_BYTES:
        for size in INGEST_REQUEST_SIZES:
            requests = max(1, n // size) if event_bytes < 10_000 else max(2, n // (size * 10))
            bodies = [
                {"events": [sized_event(rng, f"jobs.provider-{i % 30:02d}", event_bytes) for i in range(size)]}
                for _ in range(requests)
            ]
            with stack() as (settings, _clients, probe):
                packed, single = Meter(probe), Meter(probe)
                packed_client = packed.attach(AwsClients(settings).dynamodb)
                single_client = single.attach(AwsClients(settings).dynamodb)
                for body in bodies:
                    batch = events.parse_body(body, T0, settings)
                    events.store(packed_client, settings, batch, T0)
                    items = [
                        {k: counters_bench._SERIALIZER.serialize(v) for k, v in events.to_item(e, T0, settings).items()}
                        for e in batch
                    ]
                    single_client.batch_write_item(
                        RequestItems={settings.events_table: [{"PutRequest": {"Item": i}} for i in items]}
                    )
                stored = counters_bench.scan_all(probe, settings.events_table)
                largest = max(item_size(i) for i in stored)
            sent = size * requests
            now, before = packed.total(), single.total()
            rows.append(
                {
                    "event_bytes": event_bytes,
                    "events_per_request": size,
                    "events": sent,
                    "items_per_request": now.items_written / requests,
                    "write_units_per_1000": now.write_units * 1000 / sent,
                    "before_write_units_per_1000": before.write_units * 1000 / sent,
                    "ratio": now.write_units / before.write_units,
                    "largest_item_bytes": largest,
                }
            )
    return rows


# -- views ---------------------------------------------------------------------------------------


def views_workload(n: int) -> tuple[dict[str, Bill], dict[str, Any]]:
    deliveries, expected = views_bench.workload(n, 1000, 0.1)
    tally, tally_url, seed = Bill(), Bill(), Bill()
    with stack() as (settings, clients, probe):
        api, sqs_calls = Handler("api_handler"), SqsCalls()
        sqs = sqs_calls.attach(AwsClients(settings).sqs)
        now = max(v.time_ms for v in deliveries) + 1000
        arrivals = arrival_times(deliveries)
        # The key's rate check, as these arrivals incur it in one process of each front (its own
        # client, so its own allowance): the most any process could write for them.
        rate_check, url_rate_check = Meter(probe), Meter(probe)
        api_dynamodb = rate_check.attach(AwsClients(settings).dynamodb)
        for view, arrived in zip(deliveries, arrivals):
            with api.invocation():
                assert rates.admit(api_dynamodb, settings, TRACKER_KEY_ID, TRACKER_RATE, arrived)
                views_api.enqueue(
                    sqs, settings, view_validation.parse_body(json.loads(view_messages.to_message(view))), now
                )
        # The same views through the tracker's function URL: no API Gateway, the function's own
        # memory, and its work includes making the URL's event into the route's request and back.
        url_front, url_sqs_calls = Handler(url_tools.FUNCTION), SqsCalls()
        url_sqs = url_sqs_calls.attach(AwsClients(settings).sqs)
        url_dynamodb = url_rate_check.attach(AwsClients(settings).dynamodb)
        for view, arrived in zip(deliveries, arrivals):
            body = view_messages.to_message(view).encode()
            event = url_tools.event("POST", "/beacon/pageview", "key=k", {"content-type": "text/plain"}, body)
            with url_front.invocation():
                request = function_url.rest_event(event)
                assert request is not None
                assert rates.admit(url_dynamodb, settings, TRACKER_KEY_ID, TRACKER_RATE, arrived)
                views_api.enqueue(url_sqs, settings, view_validation.parse_body(json.loads(request["body"])), now)
                function_url.response({"statusCode": 202, "headers": {}, "body": '{"accepted": true}'})
        handler, counting = Handler("on_view_messages"), Meter(probe)
        client = counting.attach(AwsClients(settings).dynamodb)
        size = settings.views_batch_size
        batches = [deliveries[i : i + size] for i in range(0, len(deliveries), size)]
        for number, batch in enumerate(batches):
            messages = [
                Message(f"{number}-{i}", f"r-{number}-{i}", view_messages.to_message(v)) for i, v in enumerate(batch)
            ]
            with handler.invocation():
                views_batches.apply_messages(client, sqs, settings, messages, views_bench.T0)
        counts = {
            url: views_api.count(clients.dynamodb, settings, url, None, views_bench.T0)["views"] for url in expected
        }
        for h in (api, handler):
            h.charge(tally)
        charge(tally, counting)
        charge(tally, rate_check)
        tally.api_requests = len(deliveries)
        tally.sqs_requests = sqs_calls.requests + poller_requests(len(deliveries))
        for h in (url_front, handler):
            h.charge(tally_url)
        charge(tally_url, counting)
        charge(tally_url, url_rate_check)
        tally_url.sqs_requests = url_sqs_calls.requests + poller_requests(len(deliveries))
        # Seed: no Lambda in front (API Gateway sends to SQS), batches of 10, a transaction a view.
        seed_only = resources.Resources(
            tables=(resources.Table(views_bench.SEED_TABLE, stream=False),), queues=(), buckets=()
        )
        resources.ensure(clients.dynamodb, clients.sqs, clients.s3, seed_only, settings.aws_region)
        seed_handler, seed_meter = Handler("on_view_messages"), Meter(probe)
        client = seed_meter.attach(AwsClients(settings).dynamodb)
        seed_batches = [deliveries[i : i + SQS_POLL_BATCH] for i in range(0, len(deliveries), SQS_POLL_BATCH)]
        with seed_handler.invocation():
            seed_counts = views_bench.seed_design(client, clients.dynamodb, seed_batches)
        # seed_design reads every URL's count back at the end: not the handler's work.
        began = time.process_time()
        views_bench.seed_design(client, clients.dynamodb, [])
        for url in expected:
            clients.dynamodb.get_item(
                TableName=views_bench.SEED_TABLE, Key={"pk": {"S": f"URL#{url}"}, "sk": {"S": "STATISTICS"}}
            )
        seed_handler.billed_ms -= math.floor((time.process_time() - began) * 1000)
        seed_handler.invocations = len(seed_batches)
        seed_handler.charge(seed)
        charge(seed, seed_meter)
        seed.api_requests = len(deliveries)
        seed.sqs_requests = len(deliveries) + poller_requests(len(deliveries))
        with_realtime, with_goal = site_extras(settings, probe, deliveries, arrivals, tally_url)
    for bill in (tally, tally_url, seed, with_realtime, with_goal):
        bill.scale(MILLION / len(deliveries))
    designs = {"tally": tally, FUNCTION_URL: tally_url, REALTIME: with_realtime, WITH_GOAL: with_goal, "seed": seed}
    return designs, {
        "deliveries simulated": len(deliveries),
        "URLs": 1000,
        "delivered twice": "10%",
        "exact": counts == expected and seed_counts == expected,
        "rate writes (REST, function URL)": (
            rate_check.total("UpdateItem").requests,
            url_rate_check.total("UpdateItem").requests,
        ),
    }


def site_extras(
    settings: Settings, probe: MotoProbe, deliveries: list[View], arrivals: list[int], base: Bill
) -> tuple[Bill, Bill]:
    """The function URL's bill plus a page view's realtime visitor (its minute sketch), then plus
    a goal every view converts on (each view's client id stands for its visitor id)."""
    with_realtime, with_goal = Bill(**asdict(base)), Bill(**asdict(base))
    # Realtime: the visitor's message (queued for the site's unique count anyway) asks for its
    # minute's sketch too, so each batch of the unique-count handler merges one more sketch per
    # minute it holds. Only those merges are extra: no message, no invocation.
    noting, note_handler = Meter(probe), Handler("on_unique_items")
    client = noting.attach(AwsClients(settings).dynamodb)
    seen = [(arrived, view.time_ms, view.client_id) for view, arrived in zip(deliveries, arrivals)]
    with note_handler.invocation():
        uniques_bench.merge_minutes(client, settings, names.visitors_name(BENCH_SITE), seen)
    note_handler.invocations = 0  # the same invocations as the visitors' own batches: only their extra time
    for bill in (with_realtime, with_goal):
        note_handler.charge(bill)
        charge(bill, noting)
    # The goal: stored once (not metered), read by the front once per CACHE_SECONDS.
    stored = site_settings.parse_body(
        BENCH_SITE, {"goals": [{"name": "Read", "page": "/"}]}, site_settings.SiteSettings(BENCH_SITE), T0
    )
    site_settings.write(AwsClients(settings).dynamodb, settings, stored)
    reading, goal_front, goal_sqs = Meter(probe), Handler(url_tools.FUNCTION), SqsCalls()
    reader, sqs = reading.attach(AwsClients(settings).dynamodb), goal_sqs.attach(AwsClients(settings).sqs)
    bodies: list[tuple[int, str]] = []
    for view, arrived in zip(deliveries, arrivals):
        with goal_front.invocation():
            matched = site_settings.cached(reader, settings, BENCH_SITE, arrived).goals_of_page("/")
            beacon.enqueue_goal_visitor(sqs, settings, ITEM_KEY, BENCH_SITE, matched, view.client_id, view.time_ms)
        name = names.goal_visitors_name(BENCH_SITE, matched[0].id)
        hashes = sketches.item_hashes(ITEM_KEY, [view.client_id])
        bodies.append((arrived, uniques_batches.message_body(name, hashes, view.time_ms)))
    goal_front.invocations = 0
    handler, merging = Handler("on_unique_items"), Meter(probe)
    merger = merging.attach(AwsClients(settings).dynamodb)
    window_ms = max(settings.uniques_batching_window_seconds * 1000, 1)
    batches: dict[int, list[str]] = {}
    for arrived, body in bodies:  # what one batching window gathers, up to a batch's size
        batches.setdefault(arrived // window_ms, []).append(body)
    for number, (window, group) in enumerate(sorted(batches.items())):
        for start in range(0, len(group), settings.uniques_batch_size):
            part = group[start : start + settings.uniques_batch_size]
            messages = [Message(f"g-{number}-{start}-{i}", "", body) for i, body in enumerate(part)]
            with handler.invocation():
                uniques_batches.apply_messages(merger, settings, messages, (window + 1) * window_ms)
    for h in (goal_front, handler):
        h.charge(with_goal)
    charge(with_goal, reading)
    charge(with_goal, merging)
    with_goal.sqs_requests += goal_sqs.requests + poller_requests(len(bodies))
    return with_realtime, with_goal


def arrival_times(deliveries: list[View]) -> list[int]:
    """When each delivery reaches the front: a view when it is made, a resend just after the
    delivery before it (it carries its view's earlier time, but arrives later)."""
    arrivals: list[int] = []
    for view in deliveries:
        arrivals.append(max(view.time_ms, arrivals[-1] if arrivals else view.time_ms))
    return arrivals


# -- uniques -------------------------------------------------------------------------------------

PER_MINUTE = 10_000


def uniques_workload(minutes: int) -> tuple[dict[str, Bill], dict[str, Any]]:
    n = minutes * PER_MINUTE
    items = [f"visitor-{i}" for i in range(n)]
    step = uniques_batches.MAX_ITEMS
    tally, seed = Bill(), Bill()
    with stack() as (settings, _clients, probe):
        api, sqs_calls = Handler("api_handler"), SqsCalls()
        sqs = sqs_calls.attach(AwsClients(settings).sqs)
        bodies: list[str] = []
        for start in range(0, n, step):
            with api.invocation():
                post = uniques_api.parse_body({"data": items[start : start + step]}, T0, settings)
                uniques_api.enqueue(sqs, settings, ITEM_KEY, "visitors", post)
            bodies.append(
                uniques_batches.message_body("visitors", sketches.item_hashes(ITEM_KEY, post.items), post.time_ms)
            )
        handler, merging = Handler("on_unique_items"), Meter(probe)
        client = merging.attach(AwsClients(settings).dynamodb)
        per_batch = PER_MINUTE // step
        for minute in range(minutes):
            messages = [
                Message(f"m-{minute}-{k}", "", body)
                for k, body in enumerate(bodies[minute * per_batch : (minute + 1) * per_batch])
            ]
            with handler.invocation():
                uniques_batches.apply_messages(client, settings, messages, T0 + minute * 60_000)
        for h in (api, handler):
            h.charge(tally)
        charge(tally, merging)
        tally.api_requests = len(bodies)
        tally.sqs_requests = sqs_calls.requests + poller_requests(len(bodies))
        # Seed: a request and a Kinesis record per item, one batch a minute merged into a pickle.
        seed_api = Handler("api_handler")
        kinesis = boto3.session.Session(region_name=settings.aws_region).client("kinesis")
        kinesis.create_stream(StreamName="seed-uniques", ShardCount=1)
        sample = 500  # the front end's CPU per item, from a sample
        for item in items[:sample]:
            with seed_api.invocation():
                kinesis.put_record(StreamName="seed-uniques", PartitionKey=str(time.time()), Data=item.encode())
        seed_api.invocations = n
        seed_api.billed_ms = seed_api.billed_ms * n // sample
        seed_handler, seed_meter = Handler("on_unique_items"), Meter(probe)
        client = seed_meter.attach(AwsClients(settings).dynamodb)
        for minute in range(minutes):
            with seed_handler.invocation():
                uniques_bench.seed_merge(
                    client, settings.counts_table, "visitors", items[minute * PER_MINUTE : (minute + 1) * PER_MINUTE]
                )
        for h in (seed_api, seed_handler):
            h.charge(seed)
        charge(seed, seed_meter)
        seed.api_requests = n
        seed.kinesis_put_units = n
        seed.kinesis_shard_hours = minutes / 60  # one shard takes 10,000 small records a minute
    for bill in (tally, seed):
        bill.scale(MILLION / n)
    return {"tally": tally, "seed": seed}, {"items simulated": n, "items per request (Tally)": step}


# -- output --------------------------------------------------------------------------------------

WORKLOADS: dict[str, tuple[str, Callable[[argparse.Namespace], tuple[dict[str, Bill], dict[str, Any]]]]] = {
    "counters": ("server, batches of 25 events, 30 counters", lambda a: counters_workload(a.events)),
    "views": ("browsers, one page view each", lambda a: views_workload(a.views)),
    "uniques": ("unique counts, 10,000 items a minute", lambda a: uniques_workload(a.minutes)),
}
COLUMNS = (
    ("api_requests", "API requests", "{:,.0f}"),
    ("write_units", "write units", "{:,.0f}"),
    ("read_units", "read units", "{:,.0f}"),
    ("lambda_requests", "Lambda requests", "{:,.0f}"),
    ("lambda_gb_seconds", "Lambda GB-s", "{:,.1f}"),
    ("sqs_requests", "SQS requests", "{:,.0f}"),
    ("s3_puts", "S3 puts", "{:,.0f}"),
    ("kinesis_put_units", "Kinesis puts", "{:,.0f}"),
)


def run(args: argparse.Namespace) -> dict[str, Any]:
    began = time.perf_counter()
    out: dict[str, Any] = {
        "prices": {"as_of": PRICES_AS_OF, "region": PRICES_REGION, "on_demand": PRICES},
        "per": MILLION,
        "workloads": {},
    }
    for name, (title, measure) in WORKLOADS.items():
        if args.workloads and name not in args.workloads:
            continue
        bills, notes = measure(args)
        totals = {design: bill.price() for design, bill in bills.items()}
        out["workloads"][name] = {
            "title": title,
            "designs": {design: asdict(bill) | {"total": bill.total} for design, bill in bills.items()},
            "ratio": totals["tally"] / totals["seed"],
            "notes": notes,
        }
        if FUNCTION_URL in totals:
            out["workloads"][name]["function_url_ratio"] = totals[FUNCTION_URL] / totals["tally"]
    out["events_table"] = ingest_units(args.ingest_events) if not args.workloads else []
    out["seconds"] = round(time.perf_counter() - began, 1)
    return out


def print_table(out: dict[str, Any]) -> None:
    print(
        f"Per {out['per']:,} events, at AWS's on-demand prices in {out['prices']['region']} as published "
        f"on {out['prices']['as_of']}; simulated at a small volume and extrapolated linearly.\n"
    )
    print("| workload | design | " + " | ".join(label for _, label, _ in COLUMNS) + " | total $ | vs seed |")
    print("|---|---|" + "---|" * len(COLUMNS) + "---|---|")
    for work in out["workloads"].values():
        seed_total = work["designs"]["seed"]["total"]
        for design, bill in work["designs"].items():
            cells = " | ".join(fmt.format(bill[key]) for key, _, fmt in COLUMNS)
            print(
                f"| {work['title']} | {design} | {cells} | {bill['total']:,.2f} | {bill['total'] / seed_total:.3g}x |"
            )
    print()
    for name, work in out["workloads"].items():
        parts = ", ".join(f"{k}: {v}" for k, v in work["notes"].items())
        dollars = ", ".join(f"{k} {v:.3f}" for k, v in work["designs"]["tally"]["dollars"].items() if v)
        print(f"- {name}: {parts}; Tally's dollars by service: {dollars}")
    for work in out["workloads"].values():
        if "function_url_ratio" in work:
            print_front_doors(work)
    if not out["events_table"]:
        print(f"\n{out['seconds']} s")
        return
    print(
        "\nThe events table alone, write units per 1,000 events from stored item sizes: packed (one item "
        "per request, events/packs.py) against one item per event (the layout before packs), same events\n"
    )
    print(
        "| event JSON, bytes | events per request | items per request | write units | before | ratio | largest item, bytes |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in out["events_table"]:
        print(
            f"| {row['event_bytes']:,} | {row['events_per_request']} | {row['items_per_request']:g} | "
            f"{row['write_units_per_1000']:,.0f} | {row['before_write_units_per_1000']:,.0f} | {row['ratio']:.3f}x | "
            f"{row['largest_item_bytes']:,} |"
        )
    print(f"\n{out['seconds']} s")


def print_front_doors(work: dict[str, Any]) -> None:
    """The whole bill by service of one workload through API Gateway's REST API (before) and
    through the tracker's function URL (after), per million, with the ratio."""
    before, after = work["designs"]["tally"], work["designs"][FUNCTION_URL]
    print(f"\n{work['title']}, per million, by service: REST API (before) against the function URL (after)\n")
    print("| service | REST API $ | function URL $ |")
    print("|---|---|---|")
    for service in before["dollars"]:
        if before["dollars"][service] or after["dollars"][service]:
            print(f"| {service} | {before['dollars'][service]:,.3f} | {after['dollars'][service]:,.3f} |")
    print(f"| total | {before['total']:,.2f} | {after['total']:,.2f} |")
    print(f"\nfunction URL / REST API: {work['function_url_ratio']:.3f}x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--events", type=int, default=2000, help="counters workload: events simulated")
    parser.add_argument("--views", type=int, default=2000, help="views workload: deliveries simulated")
    parser.add_argument("--minutes", type=int, default=3, help="uniques workload: minutes simulated")
    parser.add_argument(
        "--ingest-events",
        type=int,
        default=500,
        help="events-table sweep: events per row (every request of a row is stored alike: a few suffice)",
    )
    parser.add_argument(
        "--workloads",
        nargs="*",
        choices=sorted(WORKLOADS),
        default=[],
        help="only these workloads, without the events-table sweep (default: all of it)",
    )
    args = parser.parse_args(argv)
    out = run(args)
    if args.json:
        print(json.dumps(out, indent=2, sort_keys=True))
    else:
        print_table(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
