"""CloudWatch alarms, their SNS topic and a dashboard for a stage, as CloudFormation.

Merged into the packaged template by tools/cfn_template.py. Every alarm is listed, with what
to do when it fires, in docs/deploy.md (a test keeps the two in step). Tally's own metrics
are the EMF ones chalicelib/core/telemetry.py writes: namespace `Tally`, one dimension
`function` holding the Lambda function's name (a `Ref` of the function here).
"""

from __future__ import annotations

import json
from typing import Any

from chalice.utils import to_cfn_resource_name

from chalicelib.core import telemetry
from chalicelib.core.settings import Settings
from tools import mappings, stage
from tools.resources import Resources

TOPIC = "AlarmTopic"
DASHBOARD = "Dashboard"
# The stream handler is behind when its iterator age stays above this for 5 minutes.
ITERATOR_AGE_LIMIT_MS = 5 * 60 * 1000
FIVE_MINUTES = 300
# The scheduled audit (app.py): its own alarm, on the events it finds missing.
AUDIT_FUNCTION = "run_audit"
# The scheduled fold of the listings (app.py): its own alarm, when it stops completing.
FOLD_FUNCTION = "fold_catalogs"


def function_id(name: str) -> str:
    return "APIHandler" if name == "api_handler" else to_cfn_resource_name(name)


def alarm(description: str, metric: dict[str, Any], comparison: str, threshold: float, **extra: Any) -> dict[str, Any]:
    properties = {
        "AlarmDescription": description + " See docs/deploy.md, Alarms.",
        "ActionsEnabled": True,
        "AlarmActions": [{"Ref": TOPIC}],
        "OKActions": [{"Ref": TOPIC}],
        "ComparisonOperator": comparison,
        "Threshold": threshold,
        "EvaluationPeriods": 1,
        "Period": FIVE_MINUTES,
        "TreatMissingData": "notBreaching",
        **metric,
        **extra,
    }
    return {"Type": "AWS::CloudWatch::Alarm", "Properties": properties}


def missed_runs(description: str, metric: dict[str, Any], minutes: int, intervals: int) -> dict[str, Any]:
    """An alarm on a schedule that stopped completing: fewer than one run in each of `intervals`
    periods of `minutes`, missing data counting as missed."""
    return alarm(
        description,
        metric,
        "LessThanThreshold",
        1,
        Period=minutes * 60,
        EvaluationPeriods=intervals,
        DatapointsToAlarm=intervals,
        TreatMissingData="breaching",
    )


def lambda_metric(name: str, function: str, statistic: str) -> dict[str, Any]:
    return {
        "Namespace": "AWS/Lambda",
        "MetricName": name,
        "Dimensions": [{"Name": "FunctionName", "Value": {"Ref": function_id(function)}}],
        "Statistic": statistic,
    }


def tally_metric(name: str, function: str, statistic: str = "Sum") -> dict[str, Any]:
    return {
        "Namespace": telemetry.NAMESPACE,
        "MetricName": name,
        "Dimensions": [{"Name": telemetry.DIMENSION, "Value": {"Ref": function_id(function)}}],
        "Statistic": statistic,
    }


def queue_depth(queue_name: Any) -> dict[str, Any]:
    return {
        "Namespace": "AWS/SQS",
        "MetricName": "ApproximateNumberOfMessagesVisible",
        "Dimensions": [{"Name": "QueueName", "Value": queue_name}],
        "Statistic": "Maximum",
    }


def fragments(app: Any, res: Resources, settings: Settings, stage_name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(resources, outputs): the topic, one alarm per function and condition, the dashboard."""
    cfn: dict[str, Any] = {TOPIC: {"Type": "AWS::SNS::Topic", "Properties": {"DisplayName": f"tally-{stage_name}"}}}
    functions = (["api_handler"] if app.routes else []) + [source.name for source in app.event_sources]
    for name in functions:
        cfn[f"{function_id(name)}ErrorsAlarm"] = alarm(
            f"Handler errors: {name} raised or timed out.",
            lambda_metric("Errors", name, "Sum"),
            "GreaterThanThreshold",
            0,
        )
    for source in app.event_sources:
        kind = type(source).__name__
        lid = function_id(source.name)
        if kind == "DynamoDBEventConfig":
            cfn[f"{lid}IteratorAgeAlarm"] = alarm(
                f"Stream iterator age: {source.name} is more than 5 minutes behind the events stream.",
                lambda_metric("IteratorAge", source.name, "Maximum"),
                "GreaterThanThreshold",
                ITERATOR_AGE_LIMIT_MS,
                Period=60,
                EvaluationPeriods=5,
            )
        if kind in ("DynamoDBEventConfig", "SQSEventConfig"):
            cfn[f"{lid}QuarantineAlarm"] = alarm(
                f"Quarantine growing: {source.name} set records aside (GET /quarantine lists them).",
                tally_metric("Quarantined", source.name),
                "GreaterThanThreshold",
                0,
            )
        if kind == "ScheduledEventConfig" and source.name == AUDIT_FUNCTION:
            cfn[f"{lid}ShortfallAlarm"] = alarm(
                f"Audit shortfall: {source.name} found events stored but never counted (GET /audit lists them).",
                tally_metric("Shortfall", source.name),
                "GreaterThanThreshold",
                0,
            )
        elif kind == "ScheduledEventConfig" and source.name == FOLD_FUNCTION:
            minutes = settings.catalog_fold_minutes
            cfn[f"{lid}MissedAlarm"] = missed_runs(
                f"Listing fold missed: no {source.name} run completed in 4 intervals of {minutes} minutes"
                " (GET /counters and GET /views/urls read a growing log until it runs).",
                tally_metric("CatalogFolds", source.name),
                minutes,
                4,
            )
        elif kind == "ScheduledEventConfig":
            minutes = settings.report_interval_minutes
            cfn[f"{lid}MissedAlarm"] = missed_runs(
                f"Report run missed: no {source.name} run completed in 2 intervals of {minutes} minutes.",
                tally_metric("ReportRuns", source.name),
                minutes,
                2,
            )
    for queue in res.queues:
        lid = stage.logical_id(stage.setting_field(settings, queue.name)) + "Dlq"
        cfn[f"{lid}NotEmptyAlarm"] = alarm(
            f"Dead-letter queue not empty: {queue.dead_letter_queue} holds messages its consumer gave up on.",
            queue_depth({"Fn::GetAtt": [lid, "QueueName"]}),
            "GreaterThanThreshold",
            0,
        )
    for _ in res.failure_queues:
        cfn[f"{mappings.FAILURES_QUEUE_ID}NotEmptyAlarm"] = alarm(
            "Stream batch given up on: Lambda stopped retrying a batch of the events stream (retries or record"
            " age exhausted) and described it in the stream-failures queue; its events are not counted yet.",
            queue_depth({"Fn::GetAtt": [mappings.FAILURES_QUEUE_ID, "QueueName"]}),
            "GreaterThanThreshold",
            0,
        )
    cfn[DASHBOARD] = dashboard(app, res, settings, stage_name)
    outputs = {
        TOPIC: {"Description": "Subscribe to it to receive the alarms", "Value": {"Ref": TOPIC}},
        DASHBOARD: {"Value": {"Ref": DASHBOARD}},
    }
    return cfn, outputs


def dashboard(app: Any, res: Resources, settings: Settings, stage_name: str) -> dict[str, Any]:
    """One row per question an operator asks; function names filled in by Fn::Sub."""
    background = [s.name for s in app.event_sources if type(s).__name__ != "ScheduledEventConfig"]
    schedules = [
        s.name
        for s in app.event_sources
        if type(s).__name__ == "ScheduledEventConfig" and s.name not in (AUDIT_FUNCTION, FOLD_FUNCTION)
    ]
    names = (["api_handler"] if app.routes else []) + [s.name for s in app.event_sources]

    def fn(name: str) -> str:
        return "${%s}" % function_id(name)

    def tally(metrics: list[str], functions: list[str], stat: str = "Sum") -> list[list[Any]]:
        return [
            [telemetry.NAMESPACE, m, telemetry.DIMENSION, fn(f), {"stat": stat, "label": f"{f} {m}"}]
            for f in functions
            for m in metrics
        ]

    dlqs = [stage.logical_id(stage.setting_field(settings, q.name)) + "Dlq.QueueName" for q in res.queues]
    dlqs += [f"{mappings.FAILURES_QUEUE_ID}.QueueName" for _ in res.failure_queues]
    widgets = [
        ("Counted and duplicates", tally(["Counted", "Duplicates"], background)),
        ("Set aside: quarantined, dead-lettered, failed", tally(["Quarantined", "DeadLettered", "Failed"], background)),
        (
            "Transaction retries and sketch write conflicts",
            tally(["TransactionRetries", "SketchWriteConflicts"], background),
        ),
        ("Lag: age of the newest record applied (ms)", tally(["StreamLag", "QueueLag"], background, "Maximum")),
        (
            "Stream iterator age (ms)",
            [
                ["AWS/Lambda", "IteratorAge", "FunctionName", fn(s.name), {"stat": "Maximum"}]
                for s in app.event_sources
                if type(s).__name__ == "DynamoDBEventConfig"
            ],
        ),
        ("Reports: runs and events reported", tally(["ReportRuns", "EventsReported"], schedules)),
        ("Audit: shortfall and open findings", tally(["Shortfall", "OpenFindings"], [AUDIT_FUNCTION])),
        ("Listings: folds and log items folded", tally(["CatalogFolds", "CatalogLogsFolded"], [FOLD_FUNCTION])),
        ("Handler errors", [["AWS/Lambda", "Errors", "FunctionName", fn(n), {"stat": "Sum"}] for n in names]),
        (
            "Dead-letter and stream-failures queues: messages visible",
            [
                ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", "${%s}" % q, {"stat": "Maximum"}]
                for q in dlqs
            ],
        ),
    ]
    body = {
        "widgets": [
            {
                "type": "metric",
                "x": (i % 2) * 12,
                "y": (i // 2) * 6,
                "width": 12,
                "height": 6,
                "properties": {"title": title, "metrics": metrics, "region": "${AWS::Region}", "period": 300},
            }
            for i, (title, metrics) in enumerate(widgets)
        ]
    }
    return {
        "Type": "AWS::CloudWatch::Dashboard",
        "Properties": {"DashboardName": f"tally-{stage_name}", "DashboardBody": {"Fn::Sub": json.dumps(body)}},
    }
