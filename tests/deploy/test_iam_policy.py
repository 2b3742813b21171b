"""The generated policy covers every AWS call in chalicelib, and nothing beyond the project."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tools import aws_operations, iam_evaluator, iam_policy, resources, stage
from tools.aws_operations import UnknownOperationError

REGION, ACCOUNT = "us-east-1", "123456789012"


def policy_for(project: Path) -> dict[str, Any]:
    return iam_policy.for_stage("dev", region=REGION, account=ACCOUNT, project=project)


def allows(policy: dict[str, Any], action: str, arn: str) -> bool:
    return iam_evaluator.decide(policy, action, arn).allowed


def targets(project: Path, service: str, action: str) -> list[str]:
    """The ARNs an action of the code may touch: every resource of its service."""
    res = resources.for_settings(stage.stage_settings("dev", project))
    if service == "dynamodb":
        return [f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{t.name}" for t in res.tables]
    if service == "sqs":
        return [f"arn:aws:sqs:{REGION}:{ACCOUNT}:{q.name}" for q in res.queues]
    if service == "secretsmanager":
        # A secret's ARN ends in its name, a hyphen and six random characters.
        return [f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{name}-a1B2c3" for name in res.secrets]
    if action == "s3:ListBucket":
        return [f"arn:aws:s3:::{b}" for b in res.buckets]
    return [f"arn:aws:s3:::{b}/reports/2026/report.json" for b in res.buckets]


def uncovered(policy: dict[str, Any], project: Path) -> list[str]:
    missing = []
    for call in aws_operations.scan(project / "chalicelib"):
        for action in aws_operations.IAM_ACTIONS[call.key]:
            missing += [
                f"{call.where} {action} {arn}"
                for arn in targets(project, call.service, action)
                if not allows(policy, action, arn)
            ]
    return missing


def add_module(project: Path, source: str) -> None:
    (project / "chalicelib" / "extra_calls.py").write_text(source)


def test_given_chalicelib_when_policy_generated_then_every_call_is_allowed_on_every_resource_it_may_touch(
    project: Path,
) -> None:
    calls = aws_operations.scan(project / "chalicelib")

    assert {c.key for c in calls} >= {("dynamodb", "transact_write_items"), ("dynamodb", "batch_get_item")}
    assert uncovered(policy_for(project), project) == []


def test_given_policy_then_the_item_key_secret_is_readable_and_no_other_secret_is(project: Path) -> None:
    policy = policy_for(project)
    secret = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:tally-dev-item-key"
    assert allows(policy, "secretsmanager:GetSecretValue", f"{secret}-Zz09aB")
    # A longer name that starts with ours, and another secret, stay out of reach.
    assert not allows(policy, "secretsmanager:GetSecretValue", f"{secret}-old-Zz09aB")
    assert not allows(policy, "secretsmanager:GetSecretValue", f"{secret}s-Zz09aB")
    assert not allows(policy, "secretsmanager:PutSecretValue", f"{secret}-Zz09aB")
    assert not allows(policy, "dynamodb:GetItem", f"{secret}-Zz09aB")


def test_given_policy_without_one_needed_action_then_the_coverage_check_names_it(project: Path) -> None:
    policy = policy_for(project)
    for statement in policy["Statement"]:
        statement["Action"] = [a for a in statement["Action"] if a != "dynamodb:ConditionCheckItem"]

    missing = uncovered(policy, project)

    assert missing and all("dynamodb:ConditionCheckItem" in line for line in missing)


def test_given_a_call_with_no_known_iam_actions_when_policy_generated_then_it_fails_naming_the_call(
    project: Path,
) -> None:
    add_module(project, "def everything(dynamodb):\n    return dynamodb.scan(TableName='t')\n")

    with pytest.raises(UnknownOperationError, match=r"dynamodb\.scan \(extra_calls\.py:2\)"):
        policy_for(project)


def test_given_sqs_and_s3_calls_when_policy_generated_then_scoped_to_the_queues_bucket_and_objects(
    project: Path,
) -> None:
    add_module(
        project,
        "\n".join(
            [
                "def send(aws, url):",
                "    aws.sqs.send_message_batch(QueueUrl=url, Entries=[])",
                "def report(self):",
                "    self._s3.put_object(Bucket='b', Key='k', Body=b'')",
                "    pages = self._s3.get_paginator('list_objects_v2')",
                "    return {}.get('x'), [].copy()",
            ]
        ),
    )
    settings = stage.stage_settings("dev", project)

    policy = policy_for(project)

    queue = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{settings.views_queue}"
    bucket = f"arn:aws:s3:::{settings.reports_bucket}"
    assert allows(policy, "sqs:SendMessage", queue)
    assert not allows(policy, "sqs:SendMessage", f"arn:aws:sqs:{REGION}:{ACCOUNT}:{settings.uniques_queue}-dlq")
    assert allows(policy, "s3:PutObject", f"{bucket}/any/key") and not allows(policy, "s3:PutObject", bucket)
    assert allows(policy, "s3:ListBucket", bucket) and not allows(policy, "s3:ListBucket", f"{bucket}/any/key")
    assert not allows(policy, "s3:DeleteBucket", bucket) and not allows(policy, "s3:PutBucketPolicy", bucket)
    assert uncovered(policy, project) == []


def test_given_generated_policy_then_no_wildcard_actions_and_only_the_projects_resources(project: Path) -> None:
    settings = stage.stage_settings("dev", project)
    res = resources.for_settings(settings)
    names = [t.name for t in res.tables] + [q.name for q in res.queues] + list(res.buckets) + list(res.failure_queues)
    names += list(res.secrets)

    policy = policy_for(project)

    for statement in policy["Statement"]:
        assert all("*" not in action for action in statement["Action"]), statement
        for arn in statement["Resource"]:
            assert arn != "*"
            assert any(f"/{n}" in arn or f":{n}" in arn for n in names) or ":log-group:/aws/lambda/tally-dev" in arn
    stream = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{settings.events_table}/stream/2026-11-21T00:00:00.000"
    assert allows(policy, "dynamodb:GetRecords", stream)
    assert not allows(policy, "dynamodb:GetRecords", stream.replace(settings.events_table, settings.counts_table))
    assert allows(
        policy,
        "logs:PutLogEvents",
        f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/lambda/tally-dev-on_event_records:log-stream:x",
    )
    assert not allows(policy, "logs:PutLogEvents", f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/lambda/other:x")


def test_given_the_stream_mapping_on_failure_queue_then_the_role_may_only_send_to_it(project: Path) -> None:
    """Lambda sends a given-up stream batch's description with the function's role."""
    settings = stage.stage_settings("dev", project)
    queue = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{resources.stream_failures_queue(settings)}"

    policy = policy_for(project)

    assert allows(policy, "sqs:SendMessage", queue)
    assert not allows(policy, "sqs:ReceiveMessage", queue) and not allows(policy, "sqs:DeleteMessage", queue)


def test_given_the_views_handler_sets_poison_aside_then_the_role_may_find_send_to_and_count_its_dead_letter_queue_only(
    project: Path,
) -> None:
    """The views handler sends poison to its queue's dead-letter queue and GET /quarantine/counts
    reads its depth (core.poison, core.quarantine); nothing of the app consumes a dead-letter
    queue, and the uniques handler sets its poison aside in the table, not in its queue's."""
    settings = stage.stage_settings("dev", project)
    views_dlq = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{settings.views_queue}-dlq"
    uniques_dlq = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{settings.uniques_queue}-dlq"
    every_sqs_action = sorted({a for actions in aws_operations.IAM_ACTIONS.values() for a in actions if "sqs:" in a})

    policy = policy_for(project)

    assert [a for a in every_sqs_action if allows(policy, a, views_dlq)] == sorted(iam_policy.DEAD_LETTER_ACTIONS)
    assert sorted(iam_policy.DEAD_LETTER_ACTIONS) == ["sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"]
    assert [a for a in every_sqs_action if allows(policy, a, uniques_dlq)] == []
