"""Settings read from the environment: every field's rule and bounds, and the checks across fields."""

from __future__ import annotations

import dataclasses

import pytest

from chalicelib.core import settings as settings_module
from chalicelib.core import window_params
from chalicelib.core.settings import Integer, Settings, SettingsError


def test_given_every_field_then_it_has_a_rule_in_the_table() -> None:
    assert set(settings_module.FIELDS) == {f.name for f in dataclasses.fields(Settings)}


def test_given_no_variables_or_empty_ones_when_read_then_the_defaults() -> None:
    assert Settings.from_env({}) == Settings()
    assert Settings.from_env({f.name.upper(): "" for f in dataclasses.fields(Settings)}) == Settings()


@pytest.mark.parametrize(
    ("field", "rule"), [(name, rule) for name, rule in settings_module.FIELDS.items() if isinstance(rule, Integer)]
)
def test_given_an_integer_setting_then_its_bounds_are_accepted_and_one_beyond_refused(
    field: str, rule: Integer
) -> None:
    env = field.upper()
    # The SQS batching pairing is its own check (below): a window of 0 is probed with a batch of 10.
    base = {"UNIQUES_BATCH_SIZE": "10", "VIEWS_BATCH_SIZE": "10"} if "batching_window" in field else {}
    # The view horizon's floor follows the queue's retention (its own check, below): probed at the shortest.
    if field in ("view_horizon_seconds", "view_bucket_retention_seconds"):
        base = {"VIEWS_QUEUE_RETENTION_SECONDS": "60", "VIEW_HORIZON_SECONDS": str(rule.low)}
    for value in (rule.low, rule.high):
        assert getattr(Settings.from_env({**base, env: str(value)}), field) == value
    for bad in (str(rule.low - 1), str(rule.high + 1), "many", "1.5"):
        with pytest.raises(SettingsError, match=env):
            Settings.from_env({**base, env: bad})


def test_given_variables_when_read_then_used() -> None:
    settings = Settings.from_env(
        {
            "UNIQUES_ERROR_RATE": "0.02",
            "VIEW_DEDUP": "client-day",
            "CORS_ORIGINS": " https://a.example , ,https://b.example",
            "AWS_DEFAULT_REGION": "eu-west-1",
            "COUNTS_TABLE": "counts",
        }
    )
    assert (settings.uniques_error_rate, settings.view_dedup) == (0.02, "client-day")
    assert settings.cors_origins == ("https://a.example", "https://b.example")
    assert (settings.aws_region, settings.counts_table) == ("eu-west-1", "counts")
    assert Settings.from_env({"AWS_REGION": "us-west-2", "AWS_DEFAULT_REGION": "eu-west-1"}).aws_region == "us-west-2"


@pytest.mark.parametrize(
    "env",
    [
        {"UNIQUES_ERROR_RATE": "often"},
        {"UNIQUES_ERROR_RATE": "0.001"},  # beyond the library's precision 16
        {"VIEW_DEDUP": "per-hour"},
    ],
)
def test_given_a_bad_fraction_or_choice_when_read_then_refused(env: dict[str, str]) -> None:
    with pytest.raises(SettingsError, match=next(iter(env))):
        Settings.from_env(env)


@pytest.mark.parametrize("queue", ["UNIQUES", "VIEWS"])
@pytest.mark.parametrize(
    ("size", "window", "accepted"), [(10, 0, True), (11, 0, False), (11, 1, True), (10000, 1, True)]
)
def test_given_an_sqs_batch_size_and_window_then_accepted_only_as_lambda_accepts_them(
    queue: str, size: int, window: int, accepted: bool
) -> None:
    env = {f"{queue}_BATCH_SIZE": str(size), f"{queue}_BATCHING_WINDOW_SECONDS": str(window)}
    if accepted:
        settings = Settings.from_env(env)
        assert getattr(settings, f"{queue.lower()}_batch_size") == size
    else:
        with pytest.raises(SettingsError, match=f"{queue}_BATCH_SIZE above 10"):
            Settings.from_env(env)


# -- views: the horizon and the queues' retention --------------------------------------------


def test_given_view_variables_when_read_then_fields_set() -> None:
    settings = Settings.from_env(
        {
            "VIEW_DEDUP": "client-day",
            "VIEWS_QUEUE_RETENTION_SECONDS": "86400",
            "VIEW_BUCKET_RETENTION_SECONDS": str(30 * 86400),
            "VIEWS_BATCH_SIZE": "250",
            "VIEWS_BATCHING_WINDOW_SECONDS": "2",
        }
    )
    assert (settings.view_dedup, settings.views_queue_retention_seconds) == ("client-day", 86400)
    assert (
        settings.view_horizon_seconds
        == 86400 + settings_module.DEAD_LETTER_RETENTION_SECONDS + settings_module.VIEW_HORIZON_MARGIN_SECONDS
    )
    assert settings.view_bucket_retention_seconds == 30 * 86400
    assert (settings.views_batch_size, settings.views_batching_window_seconds) == (250, 2)


def test_given_no_view_variables_when_read_then_the_horizon_outlasts_both_queues_with_a_margin() -> None:
    settings = Settings.from_env({})
    queues_keep = settings.views_queue_retention_seconds + settings_module.DEAD_LETTER_RETENTION_SECONDS
    assert settings.view_horizon_seconds >= queues_keep + settings_module.VIEW_HORIZON_MARGIN_SECONDS
    assert settings.view_bucket_retention_seconds >= window_params.MAX_WINDOW_DAYS * 86400, "the longest window"


def test_given_a_horizon_above_its_floor_when_read_then_kept() -> None:
    assert Settings.from_env({"VIEW_HORIZON_SECONDS": str(30 * 86400)}).view_horizon_seconds == 30 * 86400


@pytest.mark.parametrize(
    "env",
    [
        {"VIEW_DEDUP": "per-hour"},
        {"VIEWS_BATCH_SIZE": "0"},
        {"VIEWS_QUEUE_RETENTION_SECONDS": "x"},
        {"VIEWS_QUEUE_RETENTION_SECONDS": str(15 * 86400)},  # more than SQS keeps a message
        {"VIEW_HORIZON_SECONDS": str(7 * 86400)},  # shorter than the queues keep a view
        {"VIEWS_QUEUE_RETENTION_SECONDS": str(14 * 86400), "VIEW_HORIZON_SECONDS": str(20 * 86400)},
        {"VIEW_BUCKET_RETENTION_SECONDS": "60"},
        {"VIEW_BUCKET_RETENTION_SECONDS": str(10 * 86400)},  # buckets gone while their views can still come
    ],
)
def test_given_bad_view_variable_when_read_then_settings_error(env: dict[str, str]) -> None:
    with pytest.raises(SettingsError):
        Settings.from_env(env)
