"""Provision a stage on AWS, then deploy the app to it with Chalice.

    python -m tools.provision --stage dev              # resources, config, policy, chalice deploy
    python -m tools.provision --stage dev --no-deploy  # everything but `chalice deploy`
    python -m tools.provision --stage dev --delete     # chalice delete, then the resources
    python -m tools.provision --stage dev --check-mappings  # only compare the deployed mappings

Creates or updates (idempotently) what tools/resources.py defines for the stage: tables with
stream and TTL, queues with their dead-letter queues, the bucket. Records in the stage's
environment variables in .chalice/config.json what only exists once created (the events
stream ARN, which `on_dynamodb_record` needs literally at deploy time), sets
`autogen_policy: false` and writes the stage's least-privilege policy
(.chalice/policy-<stage>.json, see tools/iam_policy.py). AWS credentials and region come from
the usual places (AWS_PROFILE, AWS_DEFAULT_REGION, ...); AWS_ENDPOINT_URL points at an emulator.

After `chalice deploy` it sets on the events stream's event source mapping what Chalice cannot
(tools/mappings.py: ParallelizationFactor 1, the tumbling window, bounded retries, bisection,
the on-failure queue), reads the mapping back and fails, printing each setting that differs;
and creates the tracker's function URL with its CORS (tools/function_url.py).
`--check-mappings` only reads and compares (for a mapping someone may have edited by hand).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3

from tools import function_url, gateway, iam_policy, keys, mappings, resources, stage

# Lambda answers UpdateEventSourceMapping with the mapping "Updating"; wait this long for it.
SETTLE_SECONDS = 120


def provision(stage_name: str, session: Any, endpoint_url: str | None, project: Path) -> dict[str, str]:
    """Resources, config and policy for the stage; returns resource names to ARNs/URLs."""
    settings = stage.stage_settings(stage_name, project)
    definition = resources.for_settings(settings)
    region = session.region_name
    outputs = resources.ensure(*clients(session, endpoint_url), definition, region)
    outputs.update(resources.ensure_secrets(session.client("secretsmanager", endpoint_url=endpoint_url), definition))

    config = stage.load_config(project)
    stage_config = config["stages"][stage_name]
    env = stage_config.setdefault("environment_variables", {})
    for table in definition.tables:
        if table.stream:
            stream_var = stage.env_var(stage.stream_field(stage.setting_field(settings, table.name)))
            env[stream_var] = outputs[table.name]
    stage_config["autogen_policy"] = False
    stage_config["iam_policy_file"] = stage.policy_path(stage_name, project).name
    stage.save_config(config, project)

    account = session.client("sts", endpoint_url=endpoint_url).get_caller_identity()["Account"]
    policy = iam_policy.for_stage(stage_name, region=region, account=account, project=project)
    iam_policy.write(stage_name, policy, project)
    return outputs


def configure_api(stage_name: str, session: Any, endpoint_url: str | None, project: Path) -> str:
    """After `chalice deploy`: the gateway responses (JSON errors with CORS, 404 for unknown
    paths, 429 when throttled) and the stage's rate and burst limits; then redeploys the stage
    so the responses take effect. Returns the REST API id."""
    deployed = json.loads((project / ".chalice" / "deployed" / f"{stage_name}.json").read_text())
    rest_api_id = next(r["rest_api_id"] for r in deployed["resources"] if r.get("resource_type") == "rest_api")
    api_stage = stage.api_gateway_stage(stage_name, project)
    settings = stage.stage_settings(stage_name, project)
    apigateway = session.client("apigateway", endpoint_url=endpoint_url)
    gateway.put_responses(apigateway, rest_api_id)
    apigateway.create_deployment(restApiId=rest_api_id, stageName=api_stage, description="gateway responses")
    apigateway.update_stage(
        restApiId=rest_api_id,
        stageName=api_stage,
        patchOperations=gateway.throttle_operations(settings.throttle_rate_limit, settings.throttle_burst_limit),
    )
    return str(rest_api_id)


def configure_function_url(stage_name: str, session: Any, endpoint_url: str | None, project: Path) -> str:
    """After `chalice deploy`: the tracker's function URL with its CORS and public-access
    statements (tools/function_url.py), which Chalice does not create. Returns the URL."""
    deployed = json.loads((project / ".chalice" / "deployed" / f"{stage_name}.json").read_text())
    name = next(
        r["lambda_arn"].rsplit(":", 1)[-1]
        for r in deployed["resources"]
        if r.get("resource_type") == "lambda_function" and r.get("name") == function_url.FUNCTION
    )
    return function_url.ensure(session.client("lambda", endpoint_url=endpoint_url), name)


def stream_mapping_settings(stage_name: str, session: Any, endpoint_url: str | None, project: Path) -> dict[str, Any]:
    """The pinned settings, with the stage's stream-failures queue as on-failure destination."""
    sqs = session.client("sqs", endpoint_url=endpoint_url)
    settings = stage.stage_settings(stage_name, project)
    url = sqs.get_queue_url(QueueName=resources.stream_failures_queue(settings))["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return mappings.stream_settings(arn)


def stream_mapping_ids(lambda_client: Any, stream_arn: str) -> list[str]:
    pages = lambda_client.get_paginator("list_event_source_mappings").paginate(EventSourceArn=stream_arn)
    return [m["UUID"] for page in pages for m in page["EventSourceMappings"] if m["EventSourceArn"] == stream_arn]


# States in which Lambda refuses an update (ResourceInUseException) and shows old settings.
TRANSITIONS = ("Creating", "Updating", "Enabling", "Disabling")


def settled_mapping(
    lambda_client: Any, uuid: str, sleep: Callable[[float], None], settle_seconds: float
) -> dict[str, Any]:
    """The mapping once Lambda has finished creating or updating it (or the time is up)."""
    deadline = time.monotonic() + settle_seconds
    mapping = dict(lambda_client.get_event_source_mapping(UUID=uuid))
    while mapping.get("State") in TRANSITIONS and time.monotonic() < deadline:
        sleep(2)
        mapping = dict(lambda_client.get_event_source_mapping(UUID=uuid))
    return mapping


def check_stream_mappings(
    lambda_client: Any,
    stream_arn: str,
    wanted: dict[str, Any],
    sleep: Callable[[float], None] = time.sleep,
    settle_seconds: float = SETTLE_SECONDS,
) -> list[str]:
    """Every pinned setting a mapping of the stream does not hold, one line each (one line
    when no mapping reads the stream). Waits for mappings that are still changing."""
    ids = stream_mapping_ids(lambda_client, stream_arn)
    if not ids:
        return [f"no event source mapping reads {stream_arn}"]
    found = []
    for uuid in ids:
        mapping = settled_mapping(lambda_client, uuid, sleep, settle_seconds)
        function = str(mapping.get("FunctionArn", "")).rsplit(":", 1)[-1]
        found += [f"mapping {uuid} ({function}): {line}" for line in mappings.differences(wanted, mapping)]
    return found


def pin_stream_mappings(
    stage_name: str,
    session: Any,
    endpoint_url: str | None,
    project: Path,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """After `chalice deploy`: set the pinned settings on every mapping of the events stream
    (once Lambda has finished creating it), then read them back; returns what still differs
    (nothing, when all went well)."""
    lambda_client = session.client("lambda", endpoint_url=endpoint_url)
    stream_arn = stage.stage_settings(stage_name, project).events_stream_arn
    wanted = stream_mapping_settings(stage_name, session, endpoint_url, project)
    for uuid in stream_mapping_ids(lambda_client, stream_arn):
        settled_mapping(lambda_client, uuid, sleep, SETTLE_SECONDS)
        lambda_client.update_event_source_mapping(UUID=uuid, **wanted)
    return check_stream_mappings(lambda_client, stream_arn, wanted, sleep)


def check_deployed_mappings(stage_name: str, session: Any, endpoint_url: str | None, project: Path) -> list[str]:
    lambda_client = session.client("lambda", endpoint_url=endpoint_url)
    stream_arn = stage.stage_settings(stage_name, project).events_stream_arn
    wanted = stream_mapping_settings(stage_name, session, endpoint_url, project)
    return check_stream_mappings(lambda_client, stream_arn, wanted)


def report_mappings(differences: list[str]) -> int:
    for line in differences:
        print(f"event source mapping differs from tools/mappings.py: {line}", file=sys.stderr)
    if not differences:
        print("events stream mapping: pinned settings in place (tools/mappings.py)")
    return 1 if differences else 0


def first_admin_key(stage_name: str, session: Any, endpoint_url: str | None, project: Path) -> str | None:
    """An admin key when the stage has none yet (printed once by main)."""
    settings = stage.stage_settings(stage_name, project)
    return keys.first_admin_key(session.client("dynamodb", endpoint_url=endpoint_url), settings)


def teardown(stage_name: str, session: Any, endpoint_url: str | None, project: Path) -> list[str]:
    definition = resources.for_settings(stage.stage_settings(stage_name, project))
    deleted = resources.remove(*clients(session, endpoint_url), definition)
    return deleted + resources.remove_secrets(session.client("secretsmanager", endpoint_url=endpoint_url), definition)


def clients(session: Any, endpoint_url: str | None) -> tuple[Any, Any, Any]:
    dynamodb, sqs, s3 = (session.client(service, endpoint_url=endpoint_url) for service in ("dynamodb", "sqs", "s3"))
    return dynamodb, sqs, s3


def chalice(command: str, stage_name: str, project: Path) -> int:
    executable = Path(sys.executable).parent / "chalice"
    return subprocess.run([str(executable), command, "--stage", stage_name], cwd=project).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", default="dev")
    parser.add_argument("--region", default=None, help="default: the AWS configuration's region")
    parser.add_argument("--endpoint-url", default=os.environ.get("AWS_ENDPOINT_URL"))
    parser.add_argument("--project-dir", type=Path, default=stage.PROJECT)
    parser.add_argument("--no-deploy", action="store_true", help="skip `chalice deploy` / `chalice delete`")
    parser.add_argument("--delete", action="store_true", help="tear the stage down instead")
    parser.add_argument(
        "--check-mappings",
        action="store_true",
        help="only compare the deployed stream mapping with its pinned settings",
    )
    args = parser.parse_args(argv)
    if args.stage == "local":
        parser.error("the local stage runs on the emulator: use `make run`")
    if not args.delete:
        stage.require_chosen_names(args.stage, args.project_dir)
    session = boto3.session.Session(region_name=args.region)
    if not session.region_name:
        parser.error("no AWS region: set AWS_DEFAULT_REGION or pass --region")

    if args.check_mappings:
        return report_mappings(check_deployed_mappings(args.stage, session, args.endpoint_url, args.project_dir))
    if args.delete:
        if not args.no_deploy and (code := chalice("delete", args.stage, args.project_dir)) != 0:
            return code
        for name in teardown(args.stage, session, args.endpoint_url, args.project_dir):
            print(f"deleted {name}")
        return 0

    for name, arn in sorted(provision(args.stage, session, args.endpoint_url, args.project_dir).items()):
        print(f"{name}: {arn}")
    print(f"updated {stage.config_path(args.project_dir)} and {stage.policy_path(args.stage, args.project_dir)}")
    admin_key = first_admin_key(args.stage, session, args.endpoint_url, args.project_dir)
    if admin_key is not None:
        print(f"first admin key, shown this once (docs/access.md): {admin_key}")
    if args.no_deploy:
        return 0
    if (code := chalice("deploy", args.stage, args.project_dir)) != 0:
        return code
    rest_api_id = configure_api(args.stage, session, args.endpoint_url, args.project_dir)
    print(f"gateway responses and throttling set on REST API {rest_api_id}")
    url = configure_function_url(args.stage, session, args.endpoint_url, args.project_dir)
    print(f"tracker function URL (tally.js and its beacon, docs/tracker.md): {url}")
    return report_mappings(pin_stream_mappings(args.stage, session, args.endpoint_url, args.project_dir))


if __name__ == "__main__":
    sys.exit(main())
