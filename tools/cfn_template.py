"""CloudFormation for the resources Chalice does not create, for `chalice package --merge-template`.

    python -m tools.cfn_template --stage dev --output build/resources-dev.json
    chalice package --stage dev --merge-template build/resources-dev.json build/package-dev

(`make package STAGE=dev` runs both.) The alarms, their SNS topic and the dashboard come from
tools/monitoring.py (docs/deploy.md lists them). The tables, queues and bucket come from
tools/resources.py, like the local stack's and `tools.provision`'s. Chalice deep-merges this
template into its own, so the fragments below also rewire Chalice's functions: their env vars
become Ref/GetAtt of these resources and each event source points at GetAtt of its stream or
queue, which orders creation (the mapping waits for its table) and drops the literal stream
ARN that `on_dynamodb_record` otherwise needs; the stream's event source also gets the
settings tools/mappings.py pins (ParallelizationFactor 1, the tumbling window, bounded
retries, bisection, the on-failure queue), which Chalice cannot set. The tracker's function URL
and its permissions come from tools/function_url.py. Names stay explicit (the stage's names)
because the role policy Chalice embeds is a static file naming them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from chalice.utils import to_cfn_resource_name

from chalicelib.core.settings import Settings
from tools import function_url, gateway, mappings, monitoring, resources, stage
from tools.resources import Resources


def resource_fragments(res: Resources, settings: Settings) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(CloudFormation resources, env var -> Ref/GetAtt, outputs) for the stage's definition."""
    cfn: dict[str, Any] = {}
    env: dict[str, Any] = {}
    outputs: dict[str, Any] = {}
    for table in res.tables:
        field = stage.setting_field(settings, table.name)
        lid = stage.logical_id(field)
        props: dict[str, Any] = {
            "TableName": table.name,
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": resources.KEY_SCHEMA,
            "AttributeDefinitions": resources.KEY_ATTRIBUTES,
            "TimeToLiveSpecification": {"AttributeName": table.ttl_attribute, "Enabled": True},
        }
        if table.stream:
            props["StreamSpecification"] = {"StreamViewType": resources.STREAM_VIEW}
            stream_var = stage.env_var(stage.stream_field(field))
            env[stream_var] = {"Fn::GetAtt": [lid, "StreamArn"]}
            outputs[lid + "StreamArn"] = {"Value": env[stream_var]}
        cfn[lid] = {"Type": "AWS::DynamoDB::Table", "Properties": props}
        env[stage.env_var(field)] = {"Ref": lid}
        outputs[lid] = {"Value": {"Ref": lid}}
    for queue in res.queues:
        field = stage.setting_field(settings, queue.name)
        lid = stage.logical_id(field)
        cfn[lid + "Dlq"] = {
            "Type": "AWS::SQS::Queue",
            "Properties": {
                "QueueName": queue.dead_letter_queue,
                "MessageRetentionPeriod": resources.DLQ_RETENTION_SECONDS,
            },
        }
        cfn[lid] = {
            "Type": "AWS::SQS::Queue",
            "Properties": {
                "QueueName": queue.name,
                "VisibilityTimeout": queue.visibility_timeout,
                "MessageRetentionPeriod": queue.retention_seconds,
                "RedrivePolicy": {
                    "deadLetterTargetArn": {"Fn::GetAtt": [lid + "Dlq", "Arn"]},
                    "maxReceiveCount": queue.max_receive_count,
                },
            },
        }
        env[stage.env_var(field)] = {"Fn::GetAtt": [lid, "QueueName"]}
        outputs[lid + "Url"] = {"Value": {"Ref": lid}}
    for name in res.failure_queues:
        cfn[mappings.FAILURES_QUEUE_ID] = {
            "Type": "AWS::SQS::Queue",
            "Properties": {"QueueName": name, "MessageRetentionPeriod": resources.DLQ_RETENTION_SECONDS},
        }
        outputs[mappings.FAILURES_QUEUE_ID + "Url"] = {"Value": {"Ref": mappings.FAILURES_QUEUE_ID}}
    for bucket in res.buckets:
        field = stage.setting_field(settings, bucket)
        lid = stage.logical_id(field)
        cfn[lid] = {
            "Type": "AWS::S3::Bucket",
            "Properties": {
                "BucketName": bucket,
                "PublicAccessBlockConfiguration": {
                    "BlockPublicAcls": True,
                    "BlockPublicPolicy": True,
                    "IgnorePublicAcls": True,
                    "RestrictPublicBuckets": True,
                },
            },
        }
        env[stage.env_var(field)] = {"Ref": lid}
        outputs[lid] = {"Value": {"Ref": lid}}
    for secret in res.secrets:
        field = stage.setting_field(settings, secret)
        lid = stage.logical_id(field)
        # CloudFormation makes the value itself (GenerateSecretString), so it never appears in the
        # template; DeletionPolicy Retain: a stack update never replaces the key under stored hashes.
        cfn[lid] = {
            "Type": "AWS::SecretsManager::Secret",
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
            "Properties": {
                "Name": secret,
                "GenerateSecretString": {
                    "PasswordLength": resources.SECRET_LENGTH,
                    "ExcludePunctuation": True,
                },
            },
        }
        env[stage.env_var(field)] = secret  # the name, which GetSecretValue's SecretId takes
    return cfn, env, outputs


def function_fragments(app: Any, app_settings: Settings, env: dict[str, Any]) -> dict[str, Any]:
    """Overrides for Chalice's own function resources: env vars and event sources."""
    functions: dict[str, Any] = {}

    def function(name: str) -> dict[str, Any]:
        lid = "APIHandler" if name == "api_handler" else to_cfn_resource_name(name)
        return functions.setdefault(lid, {"Properties": {"Environment": {"Variables": dict(env)}}})

    if app.routes:
        function("api_handler")
    for authorizer in app.builtin_auth_handlers:
        function(authorizer.name)
    for pure in getattr(app, "pure_lambda_functions", []):
        function(pure.name)
    for source in app.event_sources:
        props = function(source.name)["Properties"]
        kind = type(source).__name__
        if kind == "DynamoDBEventConfig":
            table_field = stage.setting_field(app_settings, source.stream_arn).removesuffix("_stream_arn") + "_table"
            # The pinned settings (tools/mappings.py) Chalice cannot set: SAM passes them to
            # the AWS::Lambda::EventSourceMapping it generates.
            key, target = (
                "dynamodb-event-source",
                {
                    "Stream": {"Fn::GetAtt": [stage.logical_id(table_field), "StreamArn"]},
                    **{  # an empty list is the template's "not set"
                        name: value
                        for name, value in mappings.stream_settings(
                            {"Fn::GetAtt": [mappings.FAILURES_QUEUE_ID, "Arn"]}
                        ).items()
                        if value != []
                    },
                },
            )
        elif kind == "SQSEventConfig":
            queue = source.queue or source.queue_arn.rsplit(":", 1)[-1]
            # Chalice writes {"Fn::Sub": ...} here and the merge is per key: override that key.
            queue_id = stage.logical_id(stage.setting_field(app_settings, queue))
            key, target = "sqs-event-source", {"Queue": {"Fn::Sub": "${%s.Arn}" % queue_id}}
        else:
            continue
        props["Events"] = {to_cfn_resource_name(f"{source.name}-{key}"): {"Properties": target}}
    return functions


def api_fragment(settings: Settings) -> dict[str, Any]:
    """Merged into Chalice's RestAPI: gateway responses (tools/gateway.py) in its definition
    and the stage's rate and burst limits on every method."""
    return {
        "Properties": {
            "DefinitionBody": {"x-amazon-apigateway-gateway-responses": gateway.swagger_responses()},
            "MethodSettings": [
                {
                    "ResourcePath": "/*",
                    "HttpMethod": "*",
                    "ThrottlingRateLimit": settings.throttle_rate_limit,
                    "ThrottlingBurstLimit": settings.throttle_burst_limit,
                }
            ],
        }
    }


def build(stage_name: str, project: Path = stage.PROJECT) -> dict[str, Any]:
    settings = stage.stage_settings(stage_name, project)
    app_module = load_app(stage_name, project)
    definition = resources.for_settings(settings)
    cfn, env, outputs = resource_fragments(definition, settings)
    cfn.update(function_fragments(app_module.app, app_module.settings, env))
    alarms, alarm_outputs = monitoring.fragments(app_module.app, definition, settings, stage_name)
    cfn.update(alarms)
    outputs.update(alarm_outputs)
    cfn["RestAPI"] = api_fragment(settings)
    url, url_outputs = function_url.cfn_fragments(to_cfn_resource_name(function_url.FUNCTION))
    cfn.update(url)
    outputs.update(url_outputs)
    return {"Resources": cfn, "Outputs": outputs}


def load_app(stage_name: str, project: Path) -> Any:
    """app.py as Chalice imports it for this stage (its settings come from the stage's env)."""
    import importlib

    stage.export(stage_name, project)
    sys.path.insert(0, str(project))
    return importlib.import_module("app")


def main(argv: list[str] | None = None) -> int:
    import json

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", default="dev")
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--project-dir", type=Path, default=stage.PROJECT)
    args = parser.parse_args(argv)
    stage.require_chosen_names(args.stage, args.project_dir)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(build(args.stage, args.project_dir), indent=2) + "\n")
    print(args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
