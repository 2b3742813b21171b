"""The report settings read from the environment, with their bounds."""

from __future__ import annotations

import pytest

from chalicelib.core.settings import Settings, SettingsError


def test_given_report_variables_when_read_then_used_and_defaults_otherwise() -> None:
    assert (Settings.from_env({}).report_interval_minutes, Settings.from_env({}).report_settle_seconds) == (60, 60)
    settings = Settings.from_env({"REPORT_INTERVAL_MINUTES": "15", "REPORT_SETTLE_SECONDS": "0"})
    assert (settings.report_interval_minutes, settings.report_settle_seconds) == (15, 0)


@pytest.mark.parametrize(
    "env",
    [
        {"REPORT_INTERVAL_MINUTES": "14"},
        {"REPORT_INTERVAL_MINUTES": "1441"},
        {"REPORT_INTERVAL_MINUTES": "hourly"},
        {"REPORT_SETTLE_SECONDS": "-1"},
        {"REPORT_SETTLE_SECONDS": "3601"},
    ],
)
def test_given_out_of_range_report_variables_when_read_then_settings_error(env: dict[str, str]) -> None:
    with pytest.raises(SettingsError):
        Settings.from_env(env)
