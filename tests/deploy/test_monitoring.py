"""Alarms and dashboard in the CloudFormation path, the deploy guide naming each alarm, and the
refusal to deploy or package a stage whose bucket is still the placeholder name."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.conftest import PROJECT, copy_project
from tools import cfn_template, mappings, provision, stage

STAGE = "dev"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    project = copy_project(tmp_path_factory.mktemp("monitoring") / "project")
    return cfn_template.build(STAGE, project)


def alarms(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        lid: r["Properties"] for lid, r in template["Resources"].items() if r.get("Type") == "AWS::CloudWatch::Alarm"
    }


def test_given_the_dev_stage_then_every_alarm_condition_is_there_for_every_handler(template: dict[str, Any]) -> None:
    found = alarms(template)
    app = cfn_template.load_app(STAGE, PROJECT).app
    by_metric: dict[str, set[str]] = {}
    for props in found.values():
        (dimension,) = props["Dimensions"]
        value = dimension["Value"]
        target = value.get("Ref") or value["Fn::GetAtt"][0]
        by_metric.setdefault(f"{props['Namespace']}/{props['MetricName']}", set()).add(target)
        assert props["AlarmActions"] == [{"Ref": "AlarmTopic"}]
        assert props["Period"] * props["EvaluationPeriods"] <= 7 * 86400
    kinds = {s.name: type(s).__name__ for s in app.event_sources}
    lid = {name: "".join(p.capitalize() for p in name.split("_")) for name in kinds}
    assert by_metric["AWS/Lambda/Errors"] == {"APIHandler", *lid.values()}
    assert by_metric["AWS/Lambda/IteratorAge"] == {lid[n] for n, k in kinds.items() if k == "DynamoDBEventConfig"}
    assert by_metric["Tally/Quarantined"] == {lid[n] for n, k in kinds.items() if k != "ScheduledEventConfig"}
    assert by_metric["AWS/SQS/ApproximateNumberOfMessagesVisible"] == {
        "ViewsQueueDlq",
        "UniquesQueueDlq",
        mappings.FAILURES_QUEUE_ID,
    }
    # The stream-failures alarm watches the queue the stream mapping sends given-up batches to.
    (source,) = template["Resources"]["OnEventRecords"]["Properties"]["Events"].values()
    destination = source["Properties"]["DestinationConfig"]["OnFailure"]["Destination"]
    assert destination == {"Fn::GetAtt": [mappings.FAILURES_QUEUE_ID, "Arn"]}
    assert by_metric["Tally/Shortfall"] == {"RunAudit"}
    (shortfall,) = [p for p in found.values() if p["MetricName"] == "Shortfall"]
    assert (shortfall["ComparisonOperator"], shortfall["Threshold"], shortfall["Statistic"]) == (
        "GreaterThanThreshold",
        0,
        "Sum",
    )
    (fold,) = [p for p in found.values() if p["MetricName"] == "CatalogFolds"]
    fold_s = stage.stage_settings(STAGE, PROJECT).catalog_fold_minutes * 60
    assert (fold["Period"], fold["EvaluationPeriods"], fold["TreatMissingData"]) == (fold_s, 4, "breaching")
    (missed,) = [p for p in found.values() if p["MetricName"] == "ReportRuns"]
    interval_s = stage.stage_settings(STAGE, PROJECT).report_interval_minutes * 60
    assert (missed["Period"], missed["EvaluationPeriods"], missed["TreatMissingData"]) == (interval_s, 2, "breaching")
    assert (missed["ComparisonOperator"], missed["Threshold"]) == ("LessThanThreshold", 1)


def test_given_the_dashboard_then_its_body_is_json_naming_tally_metrics_per_function(template: dict[str, Any]) -> None:
    body = template["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    widgets = json.loads(body)["widgets"]
    names = {metric[1] for widget in widgets for metric in widget["properties"]["metrics"]}
    assert {"Counted", "Duplicates", "Quarantined", "StreamLag", "EventsReported", "IteratorAge"} <= names
    assert set(re.findall(r"\$\{(\w+)", body)) - {"AWS"} <= set(template["Resources"]) | {
        "APIHandler",
        "OnEventRecords",
        "OnViewMessages",
        "OnUniqueItems",
        "RunScheduledReport",
        "FoldCatalogs",
    }


def test_given_the_deploy_guide_then_it_says_what_to_do_for_every_alarm(template: dict[str, Any]) -> None:
    guide = (PROJECT / "docs" / "deploy.md").read_text()
    for props in alarms(template).values():
        title = props["AlarmDescription"].split(":", 1)[0]
        assert f"**{title}**" in guide, title


def test_given_the_placeholder_bucket_when_packaged_or_deployed_then_refused_saying_what_to_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = copy_project(tmp_path / "project", choose_names=False)
    output = tmp_path / "resources.json"

    with pytest.raises(SystemExit) as packaged:
        cfn_template.main(["--stage", STAGE, "--project-dir", str(project), "--output", str(output)])
    with pytest.raises(SystemExit) as deployed:
        provision.main(["--stage", STAGE, "--project-dir", str(project), "--region", "us-east-1"])

    for refusal in (packaged.value, deployed.value):
        message = str(refusal.code)
        assert "REPORTS_BUCKET='tally-dev-reports-change-me'" in message
        assert "stages.dev.environment_variables" in message and "config.json" in message
    assert not output.exists()
    assert "policy-dev.json" not in {p.name for p in (project / ".chalice").iterdir()}
