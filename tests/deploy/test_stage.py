"""A stage's settings for the tools: the one function that applies a stage's variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import stage


def test_given_a_stage_when_exported_then_its_variables_fill_only_what_is_unset_and_settings_follow(
    project: Path,
) -> None:
    environ = {"COUNTS_TABLE": "mine", "VIEWS_BATCH_SIZE": "10"}
    settings = stage.export("local", project, environ, emulator=False)

    assert environ["COUNTS_TABLE"] == "mine" and settings.counts_table == "mine"  # what was exported wins
    assert settings.views_batch_size == 10
    expected = stage.stage_environment("local", project)
    assert environ["EVENTS_TABLE"] == expected["EVENTS_TABLE"] == settings.events_table
    assert "AWS_ACCESS_KEY_ID" not in environ


def test_given_an_emulator_endpoint_when_exported_then_emulator_credentials_where_unset(project: Path) -> None:
    environ = {"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_SECRET_ACCESS_KEY": "kept"}
    settings = stage.export("local", project, environ)

    assert environ["AWS_ACCESS_KEY_ID"] == "testing" and environ["AWS_SECRET_ACCESS_KEY"] == "kept"
    assert settings.aws_endpoint_url == "http://127.0.0.1:1"


def test_given_stages_when_their_api_gateway_stage_is_asked_then_their_own_else_the_configs_else_chalices_api(
    project: Path,
) -> None:
    assert stage.api_gateway_stage("local", project) == stage.api_gateway_stage("dev", project) == "api"
    config = stage.load_config(project)
    config["stages"]["dev"]["api_gateway_stage"] = "v1"
    del config["stages"]["local"]["api_gateway_stage"]
    stage.save_config(config, project)
    assert (stage.api_gateway_stage("dev", project), stage.api_gateway_stage("local", project)) == ("v1", "api")
    config["api_gateway_stage"] = "shared"
    stage.save_config(config, project)
    assert (stage.api_gateway_stage("dev", project), stage.api_gateway_stage("local", project)) == ("v1", "shared")
    with pytest.raises(SystemExit, match="no stage 'prod'"):
        stage.api_gateway_stage("prod", project)
