"""The least-privilege IAM policy of a stage, generated from the code and the resources.

    python -m tools.iam_policy --stage dev [--region us-east-1] [--account 123456789012]

Actions: those the boto3 calls in chalicelib need (tools/aws_operations.py), plus what Lambda
itself needs to feed the handlers (read the events stream, consume the queues) and to log.
Resources: only the stage's tables (and their indexes and streams), queues and bucket, as
tools/resources.py defines them, and the dead-letter queue the views handler writes to.
The tests and the local stack enforce the result on the app's calls (tools/iam_enforcement.py). Writes .chalice/policy-<stage>.json, which Chalice uses as
the role policy because the stage sets `autogen_policy: false`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from chalicelib.core.settings import Settings
from tools import aws_operations, resources, stage
from tools.resources import Resources

# What Lambda's event source mappings call with the function's role (AWS Lambda docs).
STREAM_TRIGGER_ACTIONS = (
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
)
QUEUE_TRIGGER_ACTIONS = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
# What Lambda calls with the function's role to describe a stream batch it gave up on in the
# mapping's on-failure queue (tools/mappings.py).
ON_FAILURE_ACTIONS = ("sqs:SendMessage",)
# What the app itself calls on a dead-letter queue it sets poison aside in: its URL
# (core.queues.dead_letter_url), the poison sent to it (core.poison.DeadLetterSink), its depth
# (core.quarantine.counts). Nothing of the app receives from or deletes in a dead-letter queue.
DEAD_LETTER_ACTIONS = ("sqs:GetQueueUrl", "sqs:SendMessage", "sqs:GetQueueAttributes")
LOG_ACTIONS = ("logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents")
BUCKET_ACTIONS = {"s3:ListBucket"}  # on the bucket itself; every other s3 action is on its objects


def build(
    res: Resources, actions: dict[str, set[str]], *, app_name: str, stage_name: str, region: str, account: str
) -> dict[str, Any]:
    arn = f"{region}:{account}"
    tables = [f"arn:aws:dynamodb:{arn}:table/{t.name}" for t in res.tables]
    queues = [f"arn:aws:sqs:{arn}:{q.name}" for q in res.queues]
    buckets = [f"arn:aws:s3:::{b}" for b in res.buckets]
    functions = f"arn:aws:logs:{arn}:log-group:/aws/lambda/{app_name}-{stage_name}"
    statements = [
        _allow("Logs", LOG_ACTIONS, [functions, f"{functions}:*", f"{functions}-*", f"{functions}-*:*"]),
        _allow("Tables", actions.get("dynamodb", ()), tables + [f"{t}/index/*" for t in tables]),
        _allow(
            "StreamTriggers",
            STREAM_TRIGGER_ACTIONS,
            [f"arn:aws:dynamodb:{arn}:table/{t.name}/stream/*" for t in res.tables if t.stream],
        ),
        _allow("Queues", actions.get("sqs", ()), queues),
        _allow(
            "QueueTriggers", QUEUE_TRIGGER_ACTIONS, [f"arn:aws:sqs:{arn}:{q.name}" for q in res.queues if q.consumer]
        ),
        _allow(
            "DeadLetters",
            DEAD_LETTER_ACTIONS,
            [f"arn:aws:sqs:{arn}:{q.dead_letter_queue}" for q in res.queues if q.dead_letter_written],
        ),
        _allow("StreamFailures", ON_FAILURE_ACTIONS, [f"arn:aws:sqs:{arn}:{name}" for name in res.failure_queues]),
        _allow("Buckets", actions.get("s3", set()) & BUCKET_ACTIONS, buckets),
        _allow("Objects", actions.get("s3", set()) - BUCKET_ACTIONS, [f"{b}/*" for b in buckets]),
        _allow("Secrets", actions.get("secretsmanager", ()), [secret_arn(arn, name) for name in res.secrets]),
    ]
    return {"Version": "2012-10-17", "Statement": [s for s in statements if s["Action"] and s["Resource"]]}


def secret_arn(region_account: str, name: str) -> str:
    # Secrets Manager appends a hyphen and six random characters to a secret's name in its ARN;
    # its IAM guide advises `-??????` to match them (and nothing longer, unlike `*`).
    return f"arn:aws:secretsmanager:{region_account}:secret:{name}-??????"


def _allow(sid: str, actions: Any, arns: list[str]) -> dict[str, Any]:
    return {"Sid": sid, "Effect": "Allow", "Action": sorted(set(actions)), "Resource": sorted(arns)}


def for_stage(stage_name: str, *, region: str, account: str = "*", project: Path = stage.PROJECT) -> dict[str, Any]:
    settings = stage.stage_settings(stage_name, project)
    return for_settings(settings, stage_name=stage_name, region=region, account=account, project=project)


def for_settings(
    settings: Settings, *, stage_name: str, region: str, account: str = "*", project: Path = stage.PROJECT
) -> dict[str, Any]:
    """The role policy for the resources `settings` name (the local stack's and the tests')."""
    calls = aws_operations.scan(project / "chalicelib")
    return build(
        resources.for_settings(settings),
        aws_operations.actions_for(calls),
        app_name=stage.load_config(project)["app_name"],
        stage_name=stage_name,
        region=region,
        account=account,
    )


def write(stage_name: str, policy: dict[str, Any], project: Path = stage.PROJECT) -> Path:
    path = stage.policy_path(stage_name, project)
    path.write_text(json.dumps(policy, indent=2) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", default="dev")
    parser.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION") or "us-east-1")
    parser.add_argument("--account", default="*", help="AWS account id (default: any, the role's own)")
    parser.add_argument("--project-dir", type=Path, default=stage.PROJECT)
    args = parser.parse_args(argv)
    policy = for_stage(args.stage, region=args.region, account=args.account, project=args.project_dir)
    print(write(args.stage, policy, args.project_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
