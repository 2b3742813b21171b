"""Every setting Tally reads, taken from the environment in one place (.chalice/config.json per
stage; the local stack's own). Business code receives a Settings object."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from chalicelib.core.window_params import MAX_WINDOW_DAYS

# What makes a view unique: "event" (url + time + clientId) or "client-day" (url + clientId + UTC day).
VIEW_DEDUP_POLICIES = ("event", "client-day")
# SQS keeps a message at most 14 days; every dead-letter queue keeps its messages that long.
MAX_QUEUE_RETENTION_SECONDS = 14 * 86400
DEAD_LETTER_RETENTION_SECONDS = MAX_QUEUE_RETENTION_SECONDS
# What the view horizon adds to the retention of the views queue and its dead-letter queue:
# the time a redrive takes to be noticed and run, and the handler's own retries.
VIEW_HORIZON_MARGIN_SECONDS = 86400


class SettingsError(ValueError):
    """A setting is missing or malformed."""


@dataclass(frozen=True)
class Settings:
    events_table: str = "tally-events"
    counts_table: str = "tally-counts"
    events_stream_arn: str = "arn:aws:dynamodb:us-east-1:000000000000:table/tally-events/stream/local"
    views_queue: str = "tally-views"
    uniques_queue: str = "tally-uniques"
    reports_bucket: str = "tally-reports"
    # The Secrets Manager secret holding the stage's key for item hashes (its name, never the
    # key): a unique count's stored hashes are keyed by it (docs/design.md, "Unique counts").
    item_key_secret: str = "tally-item-key"
    aws_endpoint_url: str | None = None
    aws_region: str = "us-east-1"
    # Events table: how many write shards a quarter hour is spread over, and how long raw
    # events are kept (the reports read them; the counters have their own buckets). Size the
    # shards in write units, not events: an event costs one write unit per KB of its item (1
    # bare, 17 with 16 KB of text attributes, at most 33) and a partition takes at most 1,000
    # write units a second, so EVENT_WRITE_SHARDS >= events/s x write units per event / 500
    # (half the limit: headroom). docs/deploy.md, Sizing the events table.
    event_write_shards: int = 4
    event_ttl_seconds: int = 7 * 86400
    default_retention_seconds: int = 90_000
    # How far in the future an event's own time may lie (clients' clocks are not exact).
    max_future_skew_seconds: int = 300
    # Idempotency markers must outlive the stream's 24-hour retention plus client retries.
    marker_ttl_seconds: int = 48 * 3600
    stream_batch_size: int = 100
    # Unique counts: sketch error rate (0.01 gives 2**14 registers), write shards per sketch,
    # and the SQS source's batch (Lambda needs a batching window above 0 beyond 10 messages).
    uniques_error_rate: float = 0.01
    uniques_shards: int = 4
    uniques_batch_size: int = 10000
    uniques_batching_window_seconds: int = 60
    # Hour and day sketches of unique counts live this long after their hour or day ends.
    uniques_hour_retention_seconds: int = 48 * 3600
    uniques_day_retention_seconds: int = MAX_WINDOW_DAYS * 86400
    # Scheduled reports: how often they run, and how long after ingest an event is reported
    # (lets writes that were in flight when a run starts land before their range is read).
    report_interval_minutes: int = 60
    report_settle_seconds: int = 60
    # How many events one scheduled report run reads at most (reports/runs.py, which also
    # bounds its Queries). Sized so a run stays well inside its function's 300 s and 512 MB
    # (docs/design.md, Reports); an hour holding more is reported over several runs, and the
    # reports keep up while the events of a REPORT_INTERVAL_MINUTES stay under it.
    report_run_events: int = 100_000
    # The audit: how often it runs, and how long after an events partition's quarter hour
    # closes it is compared (its stream records must have been counted by then).
    audit_interval_minutes: int = 15
    audit_settle_minutes: int = 30
    # Listings (GET /counters, GET /views/urls): how often the names handlers logged are folded
    # into the catalogs' pages; a listing reads the log items not folded yet (core/catalog.py).
    catalog_fold_minutes: int = 15
    # Views: how long the views queue keeps a message (set on the queue where it is created;
    # SQS's default, 4 days), and the horizon: a view is counted only while its own time is
    # less than this old, and its marker lives until its time plus the horizon, so every
    # delivery of a view either finds its marker or is set aside (docs/guarantees.md). At least
    # the queue's retention plus its dead-letter queue's plus a margin (from_env checks it).
    views_queue_retention_seconds: int = 4 * 86400
    view_horizon_seconds: int = 4 * 86400 + DEAD_LETTER_RETENTION_SECONDS + VIEW_HORIZON_MARGIN_SECONDS  # the floor
    # What makes a view unique ("event": url + time + clientId, "client-day": url + clientId +
    # UTC day); the queue batch (more views per URL per batch share more counter updates).
    # View buckets (hour items with minute counts, day items with hour counts, 32-day blocks
    # with day counts) live this long after their end: how far back a ranged count reaches,
    # exact to the minute. MAX_WINDOW_DAYS (400): the longest window any read covers, as for day sketches.
    view_bucket_retention_seconds: int = MAX_WINDOW_DAYS * 86400
    view_dedup: str = "event"
    views_batch_size: int = 1000
    views_batching_window_seconds: int = 5
    # Access: browser origins allowed to call every route ("*": any), how long API Gateway
    # (and the beacon routes) keep a key's answer (a revocation takes effect within it), and
    # the stage's request rate and burst limits (set on API Gateway by the deploy paths).
    cors_origins: tuple[str, ...] = ()
    key_cache_seconds: int = 300
    throttle_rate_limit: int = 100
    throttle_burst_limit: int = 200
    # Breakdowns: which pairs of dimensions get a filter counter (a `where` of two clauses):
    # "*" every pair, "none" none, else `name+name` pairs. Single dimensions always have one.
    # Each pair counted costs two bucket writes per event carrying both (docs/counting.md).
    filter_pairs: tuple[str, ...] = ("*",)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Settings from environment variables (each field's name upper-cased; unset or empty
        keeps the default), every value checked against its rule in FIELDS, then the checks
        that span fields (CROSS_FIELD). SettingsError names the first variable that fails."""
        env = os.environ if environ is None else environ
        defaults = cls()
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            raw = env.get(field.name.upper()) or (env.get(_FALLBACK[field.name]) if field.name in _FALLBACK else None)
            rule = FIELDS[field.name]
            values[field.name] = getattr(defaults, field.name) if raw in (None, "") else rule.parse(field.name, raw)
        if not env.get("VIEW_HORIZON_SECONDS"):  # unset: the shortest horizon the queues allow
            values["view_horizon_seconds"] = view_horizon_floor(values["views_queue_retention_seconds"])
        settings = cls(**values)
        for check in CROSS_FIELD:
            check(settings)
        return settings


# -- the table of fields and their bounds --------------------------------------------------


@dataclass(frozen=True)
class Text:
    def parse(self, field: str, raw: str) -> str:
        return raw


@dataclass(frozen=True)
class Integer:
    low: float
    high: float
    kind: ClassVar[tuple[Callable[[str], Any], str]] = (int, "an integer")

    def parse(self, field: str, raw: str) -> Any:
        convert, what = self.kind
        try:
            value = convert(raw)
        except ValueError as exc:
            raise SettingsError(f"{field.upper()} must be {what}, got {raw!r}") from exc
        if not self.low <= value <= self.high:
            raise SettingsError(f"{field.upper()} must be between {self.low} and {self.high}, got {value}")
        return value


@dataclass(frozen=True)
class Fraction(Integer):
    kind = (float, "a number")


@dataclass(frozen=True)
class Choice:
    allowed: tuple[str, ...]

    def parse(self, field: str, raw: str) -> str:
        if raw not in self.allowed:
            raise SettingsError(f"{field.upper()} must be one of {', '.join(self.allowed)}, got {raw!r}")
        return raw


@dataclass(frozen=True)
class CommaList:
    def parse(self, field: str, raw: str) -> tuple[str, ...]:
        return tuple(part.strip() for part in raw.split(",") if part.strip())


@dataclass(frozen=True)
class PairList:
    """`*`, `none`, or comma-separated `name+name` pairs of dimension names."""

    def parse(self, field: str, raw: str) -> tuple[str, ...]:
        parts = CommaList().parse(field, raw)
        if parts in (("*",), ("none",)):
            return parts
        for part in parts:
            if not _PAIR.fullmatch(part) or len(set(part.split("+"))) != 2:
                raise SettingsError(f"{field.upper()} must be *, none, or name+name pairs, got {part!r}")
        return parts


_PAIR = re.compile(r"[A-Za-z0-9_.-]{1,64}\+[A-Za-z0-9_.-]{1,64}")
Rule = Text | Integer | Fraction | Choice | CommaList | PairList
DAY_S = 86_400
TEN_YEARS_S = 10 * 365 * DAY_S

# Every field of Settings with the rule its variable is read by (a test checks none is missing).
FIELDS: dict[str, Rule] = {
    "events_table": Text(),
    "counts_table": Text(),
    "events_stream_arn": Text(),
    "views_queue": Text(),
    "uniques_queue": Text(),
    "reports_bucket": Text(),
    "item_key_secret": Text(),
    "aws_endpoint_url": Text(),
    "aws_region": Text(),
    "event_write_shards": Integer(1, 100),
    "event_ttl_seconds": Integer(3600, TEN_YEARS_S),
    "default_retention_seconds": Integer(60, TEN_YEARS_S),
    "max_future_skew_seconds": Integer(0, 7 * DAY_S),
    "marker_ttl_seconds": Integer(DAY_S, 365 * DAY_S),
    "stream_batch_size": Integer(1, 10000),
    # 0.0041-0.26 keeps the precision within the library's 4-16.
    "uniques_error_rate": Fraction(0.0041, 0.26),
    "uniques_shards": Integer(1, 64),
    "uniques_batch_size": Integer(1, 10000),
    "uniques_batching_window_seconds": Integer(0, 300),
    "uniques_hour_retention_seconds": Integer(3600, MAX_WINDOW_DAYS * DAY_S),
    "uniques_day_retention_seconds": Integer(DAY_S, TEN_YEARS_S),
    "report_interval_minutes": Integer(15, 1440),
    "report_settle_seconds": Integer(0, 3600),
    "report_run_events": Integer(100, 10_000_000),
    "audit_interval_minutes": Integer(5, 1440),
    "audit_settle_minutes": Integer(1, 1440),
    "catalog_fold_minutes": Integer(5, 1440),
    "views_queue_retention_seconds": Integer(60, MAX_QUEUE_RETENTION_SECONDS),
    # The low bounds are the shortest horizon any queue retention allows (see view_horizon).
    "view_horizon_seconds": Integer(60 + DEAD_LETTER_RETENTION_SECONDS + VIEW_HORIZON_MARGIN_SECONDS, 365 * DAY_S),
    "view_bucket_retention_seconds": Integer(
        60 + DEAD_LETTER_RETENTION_SECONDS + VIEW_HORIZON_MARGIN_SECONDS, TEN_YEARS_S
    ),
    "view_dedup": Choice(VIEW_DEDUP_POLICIES),
    "views_batch_size": Integer(1, 10000),
    "views_batching_window_seconds": Integer(0, 300),
    "cors_origins": CommaList(),
    "filter_pairs": PairList(),
    "key_cache_seconds": Integer(0, 3600),
    "throttle_rate_limit": Integer(1, 10000),
    "throttle_burst_limit": Integer(1, 5000),
}
# AWS_REGION as Lambda sets it; AWS_DEFAULT_REGION as the AWS CLI and SDKs read it elsewhere.
_FALLBACK = {"aws_region": "AWS_DEFAULT_REGION"}


# -- checks that span fields ---------------------------------------------------------------


def sqs_batching(size_field: str, window_field: str) -> Callable[[Settings], None]:
    """An SQS source's batch size and batching window, as Lambda accepts them. The Lambda API
    reference (CreateEventSourceMapping, BatchSize): "Related setting: When you set BatchSize to
    a value greater than 10, you must set MaximumBatchingWindowInSeconds to at least 1."
    https://docs.aws.amazon.com/lambda/latest/api/API_CreateEventSourceMapping.html
    (The streams source is not checked: its documented default is a batch of 100 with a window
    of 0, which Lambda accepts, so the rule as written holds for SQS, where our queues live.)"""

    def check(settings: Settings) -> None:
        size, window = getattr(settings, size_field), getattr(settings, window_field)
        if size > 10 and window < 1:
            raise SettingsError(
                f"{size_field.upper()} above 10 needs {window_field.upper()} of at least 1 (Lambda refuses it)"
            )

    return check


def view_horizon_floor(views_queue_retention_seconds: int) -> int:
    """The shortest view horizon: a view can come back for as long as the views queue, then its
    dead-letter queue after a redrive (which starts the message's retention anew), keep it."""
    return views_queue_retention_seconds + DEAD_LETTER_RETENTION_SECONDS + VIEW_HORIZON_MARGIN_SECONDS


def view_horizon(settings: Settings) -> None:
    floor = view_horizon_floor(settings.views_queue_retention_seconds)
    if settings.view_horizon_seconds < floor:
        raise SettingsError(
            f"VIEW_HORIZON_SECONDS must be at least {floor}: the views queue's retention, its "
            "dead-letter queue's and a margin (docs/guarantees.md)"
        )
    if settings.view_bucket_retention_seconds < settings.view_horizon_seconds:
        # A view's day and block are copied from its hour item: that must still be there.
        raise SettingsError("VIEW_BUCKET_RETENTION_SECONDS must be at least VIEW_HORIZON_SECONDS")


CROSS_FIELD: tuple[Callable[[Settings], None], ...] = (
    sqs_batching("uniques_batch_size", "uniques_batching_window_seconds"),
    sqs_batching("views_batch_size", "views_batching_window_seconds"),
    view_horizon,
)
