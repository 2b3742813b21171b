"""Every setting Tally reads, taken from the environment in one place; business code receives a
Settings object. Each variable, its default and bounds: docs/deploy.md, "Settings"."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from chalicelib.core.window_params import MAX_WINDOW_DAYS

VIEW_DEDUP_POLICIES = ("event", "client-day")
# SQS keeps a message at most 14 days; every dead-letter queue keeps its messages that long.
MAX_QUEUE_RETENTION_SECONDS = 14 * 86400
DEAD_LETTER_RETENTION_SECONDS = MAX_QUEUE_RETENTION_SECONDS
# What the view horizon adds to the retention of the views queue and its dead-letter queue:
# the time a redrive takes to be noticed and run, and the handler's own retries.
VIEW_HORIZON_MARGIN_SECONDS = 86400
DAY_S = 86_400
TEN_YEARS_S = 10 * 365 * DAY_S


class SettingsError(ValueError):
    """A setting is missing or malformed."""


def view_horizon_floor(views_queue_retention_seconds: int) -> int:
    """The shortest view horizon: the views queue's retention, its dead-letter queue's and a margin."""
    return views_queue_retention_seconds + DEAD_LETTER_RETENTION_SECONDS + VIEW_HORIZON_MARGIN_SECONDS


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


def _read(default: Any, rule: Rule) -> Any:
    """A field's default and the rule its variable is read by (without one: Text)."""
    return dataclasses.field(default=default, metadata={"rule": rule})


@dataclass(frozen=True)
class Settings:
    """Each field is the variable of its name upper-cased: docs/deploy.md, "Settings"."""

    events_table: str = "tally-events"
    counts_table: str = "tally-counts"
    events_stream_arn: str = "arn:aws:dynamodb:us-east-1:000000000000:table/tally-events/stream/local"
    views_queue: str = "tally-views"
    uniques_queue: str = "tally-uniques"
    reports_bucket: str = "tally-reports"
    item_key_secret: str = "tally-item-key"
    aws_endpoint_url: str | None = None
    aws_region: str = "us-east-1"
    event_write_shards: int = _read(4, Integer(1, 100))
    event_ttl_seconds: int = _read(7 * DAY_S, Integer(3600, TEN_YEARS_S))
    default_retention_seconds: int = _read(90_000, Integer(60, TEN_YEARS_S))
    max_future_skew_seconds: int = _read(300, Integer(0, 7 * DAY_S))
    marker_ttl_seconds: int = _read(48 * 3600, Integer(DAY_S, 365 * DAY_S))
    stream_batch_size: int = _read(100, Integer(1, 10000))
    uniques_error_rate: float = _read(0.01, Fraction(0.0041, 0.26))
    uniques_shards: int = _read(4, Integer(1, 64))
    uniques_batch_size: int = _read(10000, Integer(1, 10000))
    uniques_batching_window_seconds: int = _read(60, Integer(0, 300))
    uniques_hour_retention_seconds: int = _read(MAX_WINDOW_DAYS * DAY_S, Integer(3600, MAX_WINDOW_DAYS * DAY_S))
    uniques_day_retention_seconds: int = _read(MAX_WINDOW_DAYS * DAY_S, Integer(DAY_S, TEN_YEARS_S))
    report_interval_minutes: int = _read(60, Integer(15, 1440))
    report_settle_seconds: int = _read(60, Integer(0, 3600))
    report_run_events: int = _read(100_000, Integer(100, 10_000_000))
    audit_interval_minutes: int = _read(15, Integer(5, 1440))
    audit_settle_minutes: int = _read(30, Integer(1, 1440))
    catalog_fold_minutes: int = _read(15, Integer(5, 1440))
    views_queue_retention_seconds: int = _read(4 * DAY_S, Integer(60, MAX_QUEUE_RETENTION_SECONDS))
    # The default is the floor; the low bounds are the shortest horizon any queue retention allows.
    view_horizon_seconds: int = _read(view_horizon_floor(4 * DAY_S), Integer(view_horizon_floor(60), 365 * DAY_S))
    view_bucket_retention_seconds: int = _read(MAX_WINDOW_DAYS * DAY_S, Integer(view_horizon_floor(60), TEN_YEARS_S))
    view_dedup: str = _read("event", Choice(VIEW_DEDUP_POLICIES))
    views_batch_size: int = _read(1000, Integer(1, 10000))
    views_batching_window_seconds: int = _read(5, Integer(0, 300))
    cors_origins: tuple[str, ...] = _read((), CommaList())
    key_cache_seconds: int = _read(300, Integer(0, 3600))
    throttle_rate_limit: int = _read(100, Integer(1, 10000))
    throttle_burst_limit: int = _read(200, Integer(1, 5000))
    filter_pairs: tuple[str, ...] = _read(("*",), PairList())

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Settings from environment variables, each checked by its rule in FIELDS, then CROSS_FIELD;
        SettingsError names the first variable that fails."""
        env = os.environ if environ is None else environ
        defaults = cls()
        values: dict[str, Any] = {}
        for name, rule in FIELDS.items():
            raw = env.get(name.upper()) or (env.get(_FALLBACK[name]) if name in _FALLBACK else None)
            values[name] = getattr(defaults, name) if raw in (None, "") else rule.parse(name, raw)
        if not env.get("VIEW_HORIZON_SECONDS"):  # unset: the shortest horizon the queues allow
            values["view_horizon_seconds"] = view_horizon_floor(values["views_queue_retention_seconds"])
        settings = cls(**values)
        for check in CROSS_FIELD:
            check(settings)
        return settings


FIELDS: dict[str, Rule] = {f.name: f.metadata.get("rule", Text()) for f in dataclasses.fields(Settings)}
_FALLBACK = {"aws_region": "AWS_DEFAULT_REGION"}


def sqs_batching(settings: Settings) -> None:
    """Each SQS source's batch size and batching window, as Lambda accepts them (docs/guarantees.md,
    "A queue batch above 10 messages needs a batching window")."""
    for source in ("uniques", "views"):
        size_field, window_field = f"{source}_batch_size", f"{source}_batching_window_seconds"
        if getattr(settings, size_field) > 10 and getattr(settings, window_field) < 1:
            raise SettingsError(
                f"{size_field.upper()} above 10 needs {window_field.upper()} of at least 1 (Lambda refuses it)"
            )


def view_horizon(settings: Settings) -> None:
    floor = view_horizon_floor(settings.views_queue_retention_seconds)
    if settings.view_horizon_seconds < floor:
        raise SettingsError(
            f"VIEW_HORIZON_SECONDS must be at least {floor}: the views queue's retention, its "
            "dead-letter queue's and a margin (docs/guarantees.md)"
        )
    if settings.view_bucket_retention_seconds < settings.view_horizon_seconds:
        raise SettingsError("VIEW_BUCKET_RETENTION_SECONDS must be at least VIEW_HORIZON_SECONDS")


CROSS_FIELD: tuple[Callable[[Settings], None], ...] = (sqs_batching, view_horizon)
