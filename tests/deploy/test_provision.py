"""Provisioning a stage: idempotent, exactly the configured resources, config and policy recorded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from tools import provision, stage

STAGE = "dev"


@pytest.fixture
def moto() -> Iterator[Any]:
    from moto import mock_aws

    with mock_aws():
        yield boto3.session.Session(region_name="us-east-1")


def configured_names(project: Path) -> dict[str, set[str]]:
    env = stage.stage_environment(STAGE, project)
    queues = {env["VIEWS_QUEUE"], env["UNIQUES_QUEUE"]}
    return {
        "tables": {env["EVENTS_TABLE"], env["COUNTS_TABLE"]},
        "queues": queues | {f"{q}-dlq" for q in queues} | {f"{env['EVENTS_TABLE']}-stream-failures"},
        "buckets": {env["REPORTS_BUCKET"]},
        "secrets": {env["ITEM_KEY_SECRET"]},
    }


def existing_names(session: Any) -> dict[str, set[str]]:
    sqs = session.client("sqs")
    return {
        "tables": set(session.client("dynamodb").list_tables()["TableNames"]),
        "queues": {url.rsplit("/", 1)[-1] for url in sqs.list_queues().get("QueueUrls", [])},
        "buckets": {b["Name"] for b in session.client("s3").list_buckets()["Buckets"]},
        "secrets": {s["Name"] for s in session.client("secretsmanager").list_secrets()["SecretList"]},
    }


def run(project: Path, *extra: str) -> int:
    return provision.main(
        ["--stage", STAGE, "--project-dir", str(project), "--no-deploy", "--region", "us-east-1", *extra]
    )


def test_given_empty_account_when_provisioned_twice_then_exactly_the_configured_resources_and_same_files(
    moto: Any, project: Path
) -> None:
    assert run(project) == 0
    first = {name: (project / ".chalice" / name).read_bytes() for name in ("config.json", "policy-dev.json")}
    assert run(project) == 0
    second = {name: (project / ".chalice" / name).read_bytes() for name in ("config.json", "policy-dev.json")}

    assert second == first
    assert existing_names(moto) == configured_names(project)


def test_given_a_provisioned_item_key_when_provisioned_again_then_the_key_is_kept(moto: Any, project: Path) -> None:
    # A new key would make every stored item hash unmatchable by new ones.
    assert run(project) == 0
    secret = stage.stage_environment(STAGE, project)["ITEM_KEY_SECRET"]
    first = moto.client("secretsmanager").get_secret_value(SecretId=secret)["SecretString"]
    assert run(project) == 0
    assert moto.client("secretsmanager").get_secret_value(SecretId=secret)["SecretString"] == first
    assert len(first) >= 32


def test_given_provisioned_stage_then_config_holds_the_real_stream_arn_and_policy_settings(
    moto: Any, project: Path
) -> None:
    run(project)

    config = json.loads((project / ".chalice" / "config.json").read_text())["stages"][STAGE]
    env = config["environment_variables"]
    table = moto.client("dynamodb").describe_table(TableName=env["EVENTS_TABLE"])["Table"]
    assert env["EVENTS_STREAM_ARN"] == table["LatestStreamArn"]
    assert config["autogen_policy"] is False
    assert config["iam_policy_file"] == "policy-dev.json"
    policy = json.loads((project / ".chalice" / "policy-dev.json").read_text())
    account = moto.client("sts").get_caller_identity()["Account"]
    resources = [arn for s in policy["Statement"] for arn in s["Resource"]]
    assert all(f":{account}:" in arn for arn in resources if not arn.startswith("arn:aws:s3:"))


def test_given_provisioned_stage_then_streams_ttl_redrive_and_visibility_are_set(moto: Any, project: Path) -> None:
    run(project)

    env = stage.stage_environment(STAGE, project)
    dynamodb, sqs = moto.client("dynamodb"), moto.client("sqs")
    events = dynamodb.describe_table(TableName=env["EVENTS_TABLE"])["Table"]
    counts = dynamodb.describe_table(TableName=env["COUNTS_TABLE"])["Table"]
    assert events["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
    assert "StreamSpecification" not in counts or not counts["StreamSpecification"]["StreamEnabled"]
    for name in (env["EVENTS_TABLE"], env["COUNTS_TABLE"]):
        ttl = dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == ("ENABLED", "expires_at")
    for name in (env["VIEWS_QUEUE"], env["UNIQUES_QUEUE"]):
        url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        redrive = json.loads(attributes["RedrivePolicy"])
        assert redrive["deadLetterTargetArn"].endswith(f":{name}-dlq")
        assert int(attributes["VisibilityTimeout"]) >= 360


def test_given_provisioned_stage_when_deleted_then_nothing_is_left_and_a_second_delete_is_harmless(
    moto: Any, project: Path
) -> None:
    run(project)
    moto.client("s3").put_object(Bucket=configured_names(project)["buckets"].pop(), Key="r/1.json", Body=b"{}")

    assert run(project, "--delete") == 0
    assert existing_names(moto) == {"tables": set(), "queues": set(), "buckets": set(), "secrets": set()}
    assert run(project, "--delete") == 0
