"""Unique-count settings read from the environment."""

from __future__ import annotations

import pytest

from chalicelib.core.settings import Settings, SettingsError


def test_given_no_variables_when_read_then_seed_defaults() -> None:
    settings = Settings.from_env({})
    assert (settings.uniques_error_rate, settings.uniques_batch_size, settings.uniques_batching_window_seconds) == (
        0.01,
        10000,
        60,
    )


def test_given_no_variables_when_read_then_hour_sketches_kept_48_hours_and_day_sketches_400_days() -> None:
    settings = Settings.from_env({})
    assert settings.uniques_hour_retention_seconds == 48 * 3600
    assert settings.uniques_day_retention_seconds == 400 * 86400
    chosen = Settings.from_env({"UNIQUES_HOUR_RETENTION_SECONDS": "7200", "UNIQUES_DAY_RETENTION_SECONDS": "864000"})
    assert (chosen.uniques_hour_retention_seconds, chosen.uniques_day_retention_seconds) == (7200, 864000)


def test_given_variables_when_read_then_used() -> None:
    settings = Settings.from_env(
        {
            "UNIQUES_ERROR_RATE": "0.02",
            "UNIQUES_SHARDS": "8",
            "UNIQUES_BATCH_SIZE": "10",
            "UNIQUES_BATCHING_WINDOW_SECONDS": "0",
        }
    )
    assert (settings.uniques_error_rate, settings.uniques_shards, settings.uniques_batch_size) == (0.02, 8, 10)


@pytest.mark.parametrize(
    "env",
    [
        {"UNIQUES_ERROR_RATE": "often"},
        {"UNIQUES_ERROR_RATE": "0.001"},  # beyond the library's precision 16
        {"UNIQUES_SHARDS": "0"},
        {"UNIQUES_HOUR_RETENTION_SECONDS": "60"},
        {"UNIQUES_DAY_RETENTION_SECONDS": "forever"},
        {"UNIQUES_BATCH_SIZE": "100", "UNIQUES_BATCHING_WINDOW_SECONDS": "0"},  # Lambda refuses this
    ],
)
def test_given_bad_variables_when_read_then_refused(env: dict[str, str]) -> None:
    with pytest.raises(SettingsError):
        Settings.from_env(env)
