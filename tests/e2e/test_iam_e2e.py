"""The local stack judges the app's AWS calls against the role policy (tools/iam_enforcement.py):
the views poison path works under the generated policy, and a policy lacking its rights fails
as AWS would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.e2e.stack import LocalStack, running_stack, wait_for
from tools import iam_policy
from tools.stage import stage_settings

pytestmark = pytest.mark.e2e
SETTINGS = stage_settings("local")
ACCOUNT = "123456789012"  # the emulator's


def emulator_sqs(stack: LocalStack) -> Any:
    return boto3.client(
        "sqs",
        endpoint_url=f"http://127.0.0.1:{stack.aws_port}",
        region_name=SETTINGS.aws_region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def dead_lettered(stack: LocalStack) -> int:
    response = stack.get("/quarantine/counts")
    assert response.status_code == 200, response.text
    return next(int(s["records"]) for s in response.json()["sources"] if s["source"] == "views-dead-letter-queue")


def test_given_a_poison_view_message_when_the_stack_handles_it_then_the_role_lets_it_reach_the_dead_letter_queue(
    local_stack: LocalStack,
) -> None:
    before = dead_lettered(local_stack)
    sqs = emulator_sqs(local_stack)

    sqs.send_message(QueueUrl=sqs.get_queue_url(QueueName=SETTINGS.views_queue)["QueueUrl"], MessageBody="not json")
    local_stack.settled()

    wait_for(lambda: dead_lettered(local_stack), 60, "the poison dead-lettered", lambda n: n == before + 1)
    assert "is not authorized to perform" not in local_stack.log(), "nothing the app calls is outside its role"


def policy_without(statement: str, tmp_path: Path) -> Path:
    policy = iam_policy.for_settings(SETTINGS, stage_name="local", region=SETTINGS.aws_region, account=ACCOUNT)
    policy["Statement"] = [s for s in policy["Statement"] if s["Sid"] != statement]
    policy_file = tmp_path / "policy.json"
    policy_file.write_text(json.dumps(policy))
    return policy_file


def test_given_a_role_policy_that_cannot_consume_the_queues_then_the_stack_refuses_to_start_as_lambda_refuses_the_mapping(
    tmp_path: Path,
) -> None:
    policy_file = policy_without("QueueTriggers", tmp_path)
    refused = "the role does not allow sqs:ReceiveMessage, sqs:DeleteMessage"

    with pytest.raises(AssertionError, match=refused), running_stack(tmp_path, "--role-policy", str(policy_file)):
        pass


def test_given_a_role_policy_without_the_dead_letter_rights_then_the_quarantine_counts_are_refused(
    tmp_path: Path,
) -> None:
    policy_file = policy_without("DeadLetters", tmp_path)

    with running_stack(tmp_path, "--role-policy", str(policy_file)) as stack:
        response = stack.get("/quarantine/counts")
        assert f"judged against {policy_file}" in stack.log()

    # The generated policy answers 200 (the test above); without its DeadLetters statement the
    # dead-letter queue's URL is refused, as SQS refuses GetQueueUrl to a role without the right.
    assert response.status_code == 503, response.text
    assert response.json() == {
        "Code": "ServiceUnavailable",
        "Message": f"queue {SETTINGS.views_queue}-dlq cannot be found",
    }
