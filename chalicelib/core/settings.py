"""Every setting Tally reads, taken from the environment in one place.

Each Chalice stage sets these in .chalice/config.json; the local stack sets them for the
embedded emulator. Business code receives a Settings object and never reads os.environ.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

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
    aws_endpoint_url: str | None = None
    aws_region: str = "us-east-1"
    # Events table: how many write shards a quarter hour is spread over, and how long raw
    # events are kept (the reports read them; the counters have their own buckets).
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
    uniques_day_retention_seconds: int = 400 * 86400
    # Scheduled reports: how often they run, and how long after ingest an event is reported
    # (lets writes that were in flight when a run starts land before their range is read).
    report_interval_minutes: int = 60
    report_settle_seconds: int = 60
    # Views: how long the views queue keeps a message (set on the queue where it is created;
    # SQS's default, 4 days), and the horizon: a view is counted only while its own time is
    # less than this old, and its marker lives until its time plus the horizon, so every
    # delivery of a view either finds its marker or is set aside (docs/guarantees.md). At least
    # the queue's retention plus its dead-letter queue's plus a margin (from_env checks it).
    views_queue_retention_seconds: int = 4 * 86400
    view_horizon_seconds: int = 4 * 86400 + DEAD_LETTER_RETENTION_SECONDS + VIEW_HORIZON_MARGIN_SECONDS
    # What makes a view unique ("event": url + time + clientId, "client-day": url + clientId +
    # UTC day); the queue batch (more views per URL per batch share more counter updates).
    # View buckets (hour items with minute counts, day items with hour counts, 32-day blocks
    # with day counts) live this long after their end: how far back a ranged count reaches,
    # exact to the minute. 400 days: the longest window any read covers, as for day sketches.
    view_bucket_retention_seconds: int = 400 * 86400
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

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        defaults = cls()

        def text(name: str, default: str) -> str:
            return env.get(name) or default

        def integer(name: str, default: int, low: int, high: int) -> int:
            raw = env.get(name)
            if raw in (None, ""):
                return default
            try:
                value = int(raw)
            except ValueError as exc:
                raise SettingsError(f"{name} must be an integer, got {raw!r}") from exc
            if not low <= value <= high:
                raise SettingsError(f"{name} must be between {low} and {high}, got {value}")
            return value

        def fraction(name: str, default: float, low: float, high: float) -> float:
            try:
                value = float(env.get(name) or default)
            except ValueError as exc:
                raise SettingsError(f"{name} must be a number, got {env.get(name)!r}") from exc
            if not low <= value <= high:
                raise SettingsError(f"{name} must be between {low} and {high}, got {value}")
            return value

        uniques_batch_size = integer("UNIQUES_BATCH_SIZE", defaults.uniques_batch_size, 1, 10000)
        uniques_window = integer("UNIQUES_BATCHING_WINDOW_SECONDS", defaults.uniques_batching_window_seconds, 0, 300)
        if uniques_batch_size > 10 and uniques_window == 0:
            raise SettingsError("UNIQUES_BATCH_SIZE above 10 needs UNIQUES_BATCHING_WINDOW_SECONDS above 0")

        views_retention = integer(
            "VIEWS_QUEUE_RETENTION_SECONDS", defaults.views_queue_retention_seconds, 60, MAX_QUEUE_RETENTION_SECONDS
        )
        horizon_floor = views_retention + DEAD_LETTER_RETENTION_SECONDS + VIEW_HORIZON_MARGIN_SECONDS
        view_horizon = integer("VIEW_HORIZON_SECONDS", horizon_floor, horizon_floor, 365 * 86400)

        bucket_retention = integer(
            "VIEW_BUCKET_RETENTION_SECONDS", defaults.view_bucket_retention_seconds, 86400, 10 * 365 * 86400
        )
        if bucket_retention < view_horizon:
            # A view's day and block are copied from its hour item: that must still be there.
            raise SettingsError("VIEW_BUCKET_RETENTION_SECONDS must be at least VIEW_HORIZON_SECONDS")

        def choice(name: str, default: str, allowed: tuple[str, ...]) -> str:
            value = text(name, default)
            if value not in allowed:
                raise SettingsError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
            return value

        def origins(name: str) -> tuple[str, ...]:
            return tuple(part.strip() for part in env.get(name, "").split(",") if part.strip())

        return cls(
            events_table=text("EVENTS_TABLE", defaults.events_table),
            counts_table=text("COUNTS_TABLE", defaults.counts_table),
            events_stream_arn=text("EVENTS_STREAM_ARN", defaults.events_stream_arn),
            views_queue=text("VIEWS_QUEUE", defaults.views_queue),
            uniques_queue=text("UNIQUES_QUEUE", defaults.uniques_queue),
            reports_bucket=text("REPORTS_BUCKET", defaults.reports_bucket),
            aws_endpoint_url=env.get("AWS_ENDPOINT_URL") or None,
            aws_region=text("AWS_REGION", text("AWS_DEFAULT_REGION", defaults.aws_region)),
            event_write_shards=integer("EVENT_WRITE_SHARDS", defaults.event_write_shards, 1, 100),
            event_ttl_seconds=integer("EVENT_TTL_SECONDS", defaults.event_ttl_seconds, 3600, 10 * 365 * 86400),
            default_retention_seconds=integer(
                "DEFAULT_RETENTION_SECONDS", defaults.default_retention_seconds, 60, 10 * 365 * 86400
            ),
            max_future_skew_seconds=integer("MAX_FUTURE_SKEW_SECONDS", defaults.max_future_skew_seconds, 0, 7 * 86400),
            marker_ttl_seconds=integer("MARKER_TTL_SECONDS", defaults.marker_ttl_seconds, 86400, 365 * 86400),
            stream_batch_size=integer("STREAM_BATCH_SIZE", defaults.stream_batch_size, 1, 10000),
            # 0.0041-0.26 keeps the precision within the library's 4-16.
            uniques_error_rate=fraction("UNIQUES_ERROR_RATE", defaults.uniques_error_rate, 0.0041, 0.26),
            uniques_shards=integer("UNIQUES_SHARDS", defaults.uniques_shards, 1, 64),
            uniques_batch_size=uniques_batch_size,
            uniques_batching_window_seconds=uniques_window,
            uniques_hour_retention_seconds=integer(
                "UNIQUES_HOUR_RETENTION_SECONDS", defaults.uniques_hour_retention_seconds, 3600, 400 * 86400
            ),
            uniques_day_retention_seconds=integer(
                "UNIQUES_DAY_RETENTION_SECONDS", defaults.uniques_day_retention_seconds, 86400, 10 * 365 * 86400
            ),
            report_interval_minutes=integer("REPORT_INTERVAL_MINUTES", defaults.report_interval_minutes, 15, 1440),
            report_settle_seconds=integer("REPORT_SETTLE_SECONDS", defaults.report_settle_seconds, 0, 3600),
            views_queue_retention_seconds=views_retention,
            view_horizon_seconds=view_horizon,
            view_bucket_retention_seconds=bucket_retention,
            view_dedup=choice("VIEW_DEDUP", defaults.view_dedup, VIEW_DEDUP_POLICIES),
            views_batch_size=integer("VIEWS_BATCH_SIZE", defaults.views_batch_size, 1, 10000),
            views_batching_window_seconds=integer(
                "VIEWS_BATCHING_WINDOW_SECONDS", defaults.views_batching_window_seconds, 0, 300
            ),
            cors_origins=origins("CORS_ORIGINS"),
            key_cache_seconds=integer("KEY_CACHE_SECONDS", defaults.key_cache_seconds, 0, 3600),
            throttle_rate_limit=integer("THROTTLE_RATE_LIMIT", defaults.throttle_rate_limit, 1, 10000),
            throttle_burst_limit=integer("THROTTLE_BURST_LIMIT", defaults.throttle_burst_limit, 1, 5000),
        )
