"""The events stream's event source mapping: `make deploy` pins its settings after `chalice
deploy`, reads them back and fails on any difference; the template pins the same settings.

The deployed side runs against moto, which stores and returns every setting pinned here
(ParallelizationFactor, TumblingWindowInSeconds, retries, record age, bisection,
DestinationConfig, FunctionResponseTypes) but does not act on them: that Lambda honours them
is AWS's documented behaviour (docs/guarantees.md), not something moto can show.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.deploy.conftest import app_imports_isolated
from tools import cfn_template, mappings, provision, resources, stage

STAGE = "dev"


@pytest.fixture
def deployed(project: Path) -> Iterator[tuple[Any, Path]]:
    """moto with the stage provisioned and the stream mapping Chalice's deploy would make:
    the handler's function, reading the events stream with Chalice's two settings only."""
    from moto import mock_aws

    with mock_aws():
        session = boto3.session.Session(region_name="us-east-1")
        assert provision.main(["--stage", STAGE, "--project-dir", str(project), "--no-deploy"]) == 0
        role = session.client("iam").create_role(
            RoleName="tally-dev", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []})
        )["Role"]["Arn"]
        code = io.BytesIO()
        with zipfile.ZipFile(code, "w") as archive:
            archive.writestr("app.py", "def handler(event, context):\n    return {}\n")
        lambda_client = session.client("lambda")
        lambda_client.create_function(
            FunctionName="tally-dev-on_event_records",
            Runtime="python3.11",
            Role=role,
            Handler="app.handler",
            Code={"ZipFile": code.getvalue()},
        )
        lambda_client.create_event_source_mapping(
            FunctionName="tally-dev-on_event_records",
            EventSourceArn=stage.stage_settings(STAGE, project).events_stream_arn,
            BatchSize=100,
            StartingPosition="TRIM_HORIZON",
        )
        yield session, project


def only_mapping(session: Any, project: Path) -> dict[str, Any]:
    lambda_client = session.client("lambda")
    (uuid,) = provision.stream_mapping_ids(lambda_client, stage.stage_settings(STAGE, project).events_stream_arn)
    return dict(lambda_client.get_event_source_mapping(UUID=uuid))


def test_given_a_mapping_as_chalice_deploys_it_when_pinned_then_it_holds_every_pinned_setting(
    deployed: tuple[Any, Path],
) -> None:
    session, project = deployed
    before = provision.check_deployed_mappings(STAGE, session, None, project)

    differences = provision.pin_stream_mappings(STAGE, session, None, project)

    after = only_mapping(session, project)
    failures_queue = resources.stream_failures_queue(stage.stage_settings(STAGE, project))
    assert len(before) == 6  # Chalice's mapping: every pinned setting but the empty response types missing
    assert differences == []
    assert after["ParallelizationFactor"] == 1
    assert after["TumblingWindowInSeconds"] == mappings.TUMBLING_WINDOW_SECONDS
    assert after["MaximumRetryAttempts"] == mappings.MAXIMUM_RETRY_ATTEMPTS
    assert after["MaximumRecordAgeInSeconds"] == mappings.MAXIMUM_RECORD_AGE_SECONDS
    assert after["BisectBatchOnFunctionError"] is True
    assert after["DestinationConfig"]["OnFailure"]["Destination"].endswith(f":{failures_queue}")
    assert (after["BatchSize"], after["StartingPosition"]) == (100, "TRIM_HORIZON")  # Chalice's stay


def test_given_a_pinned_mapping_changed_in_the_console_then_the_check_names_the_setting_and_fails(
    deployed: tuple[Any, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    session, project = deployed
    assert provision.pin_stream_mappings(STAGE, session, None, project) == []
    uuid = only_mapping(session, project)["UUID"]
    session.client("lambda").update_event_source_mapping(UUID=uuid, ParallelizationFactor=2, MaximumRetryAttempts=-1)

    code = provision.main(["--stage", STAGE, "--project-dir", str(project), "--check-mappings"])

    printed = capsys.readouterr().err
    assert code == 1
    assert f"mapping {uuid} (tally-dev-on_event_records): ParallelizationFactor is 2, pinned 1" in printed
    assert "MaximumRetryAttempts is -1, pinned 50" in printed
    assert "TumblingWindowInSeconds" not in printed  # only what differs
    # The next deploy puts them back.
    assert provision.pin_stream_mappings(STAGE, session, None, project) == []
    assert provision.main(["--stage", STAGE, "--project-dir", str(project), "--check-mappings"]) == 0


def test_given_a_destination_or_response_types_changed_then_the_check_names_them(
    deployed: tuple[Any, Path],
) -> None:
    session, project = deployed
    provision.pin_stream_mappings(STAGE, session, None, project)
    uuid = only_mapping(session, project)["UUID"]
    elsewhere = "arn:aws:sqs:us-east-1:123456789012:somewhere-else"
    session.client("lambda").update_event_source_mapping(
        UUID=uuid,
        DestinationConfig={"OnFailure": {"Destination": elsewhere}},
        FunctionResponseTypes=["ReportBatchItemFailures"],
    )

    differences = provision.check_deployed_mappings(STAGE, session, None, project)

    assert len(differences) == 2
    assert f"DestinationConfig.OnFailure.Destination is {elsewhere!r}" in differences[0] + differences[1]
    assert "FunctionResponseTypes is ['ReportBatchItemFailures'], pinned []" in differences[0] + differences[1]


def test_given_no_mapping_reads_the_stream_then_the_check_says_so(deployed: tuple[Any, Path]) -> None:
    session, project = deployed
    lambda_client = session.client("lambda")
    lambda_client.delete_event_source_mapping(UUID=only_mapping(session, project)["UUID"])

    assert provision.check_deployed_mappings(STAGE, session, None, project) == [
        f"no event source mapping reads {stage.stage_settings(STAGE, project).events_stream_arn}"
    ]


class ChangingMapping:
    """A Lambda client whose one mapping answers these states in turn, then stays in the last:
    what AWS shows while it creates or updates a mapping (moto answers at once)."""

    def __init__(self, *states: str) -> None:
        self.states = list(states)
        self.updates: list[tuple[str, dict[str, Any]]] = []
        self.factor = 4

    def get_paginator(self, _: str) -> Any:
        return self

    def paginate(self, **_: Any) -> list[dict[str, Any]]:
        return [{"EventSourceMappings": [{"UUID": "u-1", "EventSourceArn": "arn:stream"}]}]

    def get_event_source_mapping(self, UUID: str) -> dict[str, Any]:
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        return {"UUID": UUID, "State": state, "ParallelizationFactor": self.factor}

    def update_event_source_mapping(self, UUID: str, **settings: Any) -> None:
        if self.states[0] != "Enabled":
            raise AssertionError("Lambda refuses an update while the mapping is changing")
        self.updates.append((UUID, settings))
        self.factor = settings["ParallelizationFactor"]


def test_given_a_mapping_still_updating_then_the_check_waits_for_it() -> None:
    client = ChangingMapping("Updating", "Updating", "Enabled")
    client.factor = 1
    pauses: list[float] = []

    found = provision.check_stream_mappings(client, "arn:stream", {"ParallelizationFactor": 1}, pauses.append)

    assert found == [] and len(pauses) == 2


def test_given_a_mapping_chalice_just_created_then_pinning_waits_before_updating(
    monkeypatch: pytest.MonkeyPatch, project: Path
) -> None:
    client = ChangingMapping("Creating", "Creating", "Enabled")
    session = type("Session", (), {"client": lambda self, name, endpoint_url=None: client})()
    monkeypatch.setattr(provision, "stream_mapping_settings", lambda *_: {"ParallelizationFactor": 1})
    monkeypatch.setattr(provision, "stream_mapping_ids", lambda *_: ["u-1"])
    pauses: list[float] = []

    found = provision.pin_stream_mappings(STAGE, session, None, project, pauses.append)

    assert found == [] and client.updates == [("u-1", {"ParallelizationFactor": 1})] and len(pauses) == 2


@pytest.mark.parametrize(
    ("actual", "expected"),
    [
        ({"ParallelizationFactor": 1, "FunctionResponseTypes": []}, []),
        ({"ParallelizationFactor": 1}, []),  # Lambda leaves out response types never set
        ({"ParallelizationFactor": 3}, ["ParallelizationFactor is 3, pinned 1"]),
        ({}, ["ParallelizationFactor is None, pinned 1"]),
        (
            {"ParallelizationFactor": 1, "DestinationConfig": {"OnFailure": {}, "OnSuccess": {}}},
            ["DestinationConfig.OnFailure.Destination is None, pinned 'arn:q'"],
        ),
        (
            {"ParallelizationFactor": 1, "DestinationConfig": {"OnFailure": {"Destination": "arn:q"}, "OnSuccess": {}}},
            [],
        ),
    ],
)
def test_given_a_mapping_read_back_then_only_the_pinned_settings_are_compared(
    actual: dict[str, Any], expected: list[str]
) -> None:
    wanted = {
        "ParallelizationFactor": 1,
        "FunctionResponseTypes": [],
        "DestinationConfig": {"OnFailure": {"Destination": "arn:q"}},
    }
    if "DestinationConfig" not in actual:
        wanted.pop("DestinationConfig")

    assert mappings.differences(wanted, actual) == expected


def test_given_the_pinned_values_then_within_lambdas_bounds_and_inside_the_streams_retention() -> None:
    settings = mappings.stream_settings("arn:q")

    assert settings["ParallelizationFactor"] == 1
    assert mappings.RETRY_ATTEMPTS_RANGE[0] <= settings["MaximumRetryAttempts"] <= mappings.RETRY_ATTEMPTS_RANGE[1]
    assert mappings.RECORD_AGE_RANGE[0] <= settings["MaximumRecordAgeInSeconds"] < 24 * 3600  # the stream's retention
    assert 0 < settings["TumblingWindowInSeconds"] <= mappings.TUMBLING_WINDOW_RANGE[1]


def test_given_the_template_fragment_then_the_stream_source_carries_the_pinned_settings_and_the_queue(
    project: Path,
) -> None:
    with app_imports_isolated():
        built = cfn_template.build(STAGE, project)
    settings = stage.stage_settings(STAGE, project)

    (event,) = built["Resources"]["OnEventRecords"]["Properties"]["Events"].values()
    source = event["Properties"]
    queue = built["Resources"][mappings.FAILURES_QUEUE_ID]["Properties"]

    pinned = mappings.stream_settings({"Fn::GetAtt": [mappings.FAILURES_QUEUE_ID, "Arn"]})
    assert {k: v for k, v in source.items() if k != "Stream"} == {k: v for k, v in pinned.items() if v != []}
    assert queue["QueueName"] == resources.stream_failures_queue(settings)


def test_given_the_tumbling_window_pinned_then_the_stream_handler_answers_state(app_module: Any) -> None:
    """Lambda: with a tumbling window the response must contain `state`, else the invocation
    counts as failed (docs/guarantees.md, Tumbling windows)."""
    stream = "arn:aws:dynamodb:us-east-1:123456789012:table/tally-events/stream/2026-11-23T00:00:00.000"
    event = {
        "Records": [],
        "shardId": "shardId-00000001700000000000-00000001",
        "eventSourceARN": stream,
        "window": {"start": "2026-11-23T22:00:00Z", "end": "2026-11-23T22:01:00Z"},
        "state": {},
        "isFinalInvokeForWindow": False,
        "isWindowTerminatedEarly": False,
    }

    answer = app_module.on_event_records(event, None)

    assert mappings.TUMBLING_WINDOW_SECONDS > 0 and "state" in answer
