"""The view settings read from the environment."""

from __future__ import annotations

import pytest

from chalicelib.core.settings import (
    DEAD_LETTER_RETENTION_SECONDS,
    VIEW_HORIZON_MARGIN_SECONDS,
    Settings,
    SettingsError,
)


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
    assert settings.view_horizon_seconds == 86400 + DEAD_LETTER_RETENTION_SECONDS + VIEW_HORIZON_MARGIN_SECONDS
    assert settings.view_bucket_retention_seconds == 30 * 86400
    assert (settings.views_batch_size, settings.views_batching_window_seconds) == (250, 2)


def test_given_no_view_variables_when_read_then_the_horizon_outlasts_both_queues_with_a_margin() -> None:
    settings = Settings.from_env({})
    assert settings.view_dedup == "event"
    assert settings.views_queue_retention_seconds == 4 * 86400, "SQS's default, now set explicitly"
    assert settings.view_horizon_seconds == (4 + 14 + 1) * 86400
    assert settings.view_bucket_retention_seconds == 400 * 86400, "as long as the longest window"


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
        {"VIEW_BUCKET_RETENTION_SECONDS": str(10 * 86400)},  # day and block copied from a gone hour
    ],
)
def test_given_bad_view_variable_when_read_then_settings_error(env: dict[str, str]) -> None:
    with pytest.raises(SettingsError):
        Settings.from_env(env)
