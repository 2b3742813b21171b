"""The view settings read from the environment."""

from __future__ import annotations

import pytest

from chalicelib.core.settings import Settings, SettingsError


def test_given_view_variables_when_read_then_fields_set() -> None:
    settings = Settings.from_env(
        {
            "VIEW_DEDUP": "client-day",
            "VIEW_MARKER_TTL_SECONDS": "86400",
            "VIEW_BUCKET_RETENTION_SECONDS": "172800",
            "VIEWS_BATCH_SIZE": "250",
            "VIEWS_BATCHING_WINDOW_SECONDS": "2",
        }
    )
    assert (settings.view_dedup, settings.view_marker_ttl_seconds) == ("client-day", 86400)
    assert settings.view_bucket_retention_seconds == 172800
    assert (settings.views_batch_size, settings.views_batching_window_seconds) == (250, 2)


def test_given_no_view_variables_when_read_then_week_long_markers_per_event() -> None:
    settings = Settings.from_env({})
    assert (settings.view_dedup, settings.view_marker_ttl_seconds) == ("event", 7 * 86400)
    assert settings.view_bucket_retention_seconds == 400 * 86400, "as long as the longest window"


@pytest.mark.parametrize(
    "env",
    [
        {"VIEW_DEDUP": "per-hour"},
        {"VIEWS_BATCH_SIZE": "0"},
        {"VIEW_MARKER_TTL_SECONDS": "x"},
        {"VIEW_BUCKET_RETENTION_SECONDS": "60"},
    ],
)
def test_given_bad_view_variable_when_read_then_settings_error(env: dict[str, str]) -> None:
    with pytest.raises(SettingsError):
        Settings.from_env(env)
