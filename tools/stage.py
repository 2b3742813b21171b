"""A Chalice stage's configuration (.chalice/config.json) and how resources map to settings.

Every resource name comes from a Settings field (`events_table`, `views_queue`, ...), read
from the env var of the same name upper-cased. That field name is the resource's stable
identity across stages: it gives the CloudFormation logical id (`EventsTable`) and the env
var to wire (`EVENTS_TABLE`), so a new resource in tools/resources.py needs no code here.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from chalicelib.core.settings import Settings

PROJECT = Path(__file__).resolve().parent.parent


def config_path(project: Path = PROJECT) -> Path:
    return project / ".chalice" / "config.json"


def load_config(project: Path = PROJECT) -> dict[str, Any]:
    return json.loads(config_path(project).read_text())


def save_config(config: dict[str, Any], project: Path = PROJECT) -> None:
    config_path(project).write_text(json.dumps(config, indent=2) + "\n")


def stage_environment(stage: str, project: Path = PROJECT) -> dict[str, str]:
    config = load_config(project)
    if stage not in config.get("stages", {}):
        raise SystemExit(f"no stage {stage!r} in {config_path(project)}")
    env = dict(config.get("environment_variables", {}))
    env.update(config["stages"][stage].get("environment_variables", {}))
    return env


def api_gateway_stage(stage: str, project: Path = PROJECT) -> str:
    """The API Gateway stage `chalice deploy` puts the stage's API in: the first segment of every
    URL of the API (`https://<id>.execute-api.<region>.amazonaws.com/<stage>/...`). The stage's
    `api_gateway_stage`, else the config's, else Chalice's default, `api`."""
    config = load_config(project)
    if stage not in config.get("stages", {}):
        raise SystemExit(f"no stage {stage!r} in {config_path(project)}")
    return str(config["stages"][stage].get("api_gateway_stage", config.get("api_gateway_stage", "api")))


def stage_settings(stage: str, project: Path = PROJECT) -> Settings:
    """The stage's settings as .chalice/config.json gives them (Chalice sets them on AWS)."""
    return Settings.from_env(stage_environment(stage, project))


# What an AWS emulator accepts: any credentials, and a region.
EMULATOR_DEFAULTS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def export(
    stage: str,
    project: Path = PROJECT,
    environ: MutableMapping[str, str] = os.environ,
    emulator: bool | None = None,
) -> Settings:
    """Run this process as the stage: its variables go into `environ` where unset (what the
    user exported wins), for code that reads them at import as Lambda does (app.py), and its
    settings are returned. With `emulator` (default: when AWS_ENDPOINT_URL is then set), the
    credentials and region an emulator accepts are set too where unset. The one place tools
    apply a stage's variables."""
    for key, value in stage_environment(stage, project).items():
        environ.setdefault(key, value)
    if emulator or (emulator is None and environ.get("AWS_ENDPOINT_URL")):
        for key, value in EMULATOR_DEFAULTS.items():
            environ.setdefault(key, value)
    return Settings.from_env(environ)


def policy_path(stage: str, project: Path = PROJECT) -> Path:
    return project / ".chalice" / f"policy-{stage}.json"


def setting_field(settings: Settings, value: str) -> str:
    """The Settings field holding this resource name or ARN."""
    matches = [f.name for f in dataclasses.fields(settings) if getattr(settings, f.name) == value]
    if len(matches) != 1:
        raise ValueError(f"{value!r} must be the value of exactly one setting, found {matches}")
    return matches[0]


def env_var(field: str) -> str:
    return field.upper()


def stream_field(table_field: str) -> str:
    """`events_table` -> `events_stream_arn`: where the app reads that table's stream ARN."""
    return table_field.removesuffix("_table") + "_stream_arn"


def logical_id(field: str) -> str:
    return "".join(part.capitalize() for part in field.split("_"))


# Names the shipped config leaves for the user to choose (S3 bucket names are global).
PLACEHOLDER_MARK = "change-me"


def placeholder_settings(stage: str, project: Path = PROJECT) -> dict[str, str]:
    """Env vars of the stage whose value is still a placeholder name."""
    return {k: v for k, v in stage_environment(stage, project).items() if PLACEHOLDER_MARK in v}


def require_chosen_names(stage: str, project: Path = PROJECT) -> None:
    """Refuse to deploy or package a stage whose resource names are still placeholders."""
    left = placeholder_settings(stage, project)
    if left:
        names = ", ".join(f"{k}={v!r}" for k, v in sorted(left.items()))
        raise SystemExit(
            f"stage {stage!r} still has placeholder names: {names}. S3 bucket names are global, so choose "
            f"your own: set them under stages.{stage}.environment_variables in {config_path(project)} "
            f"(for example REPORTS_BUCKET=tally-{stage}-reports-<your account id>), then run again. "
            "See docs/deploy.md."
        )
