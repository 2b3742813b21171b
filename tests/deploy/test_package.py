"""`chalice package` for the dev stage: a template cfn-lint accepts and a zip that runs alone.

Packaging fetches the Lambda wheels through pip (PyPI; cached across runs in a temp dir).
The tests skip, saying why, only when packaging fails and the registry cannot be reached.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from boto3.dynamodb.types import TypeSerializer
from chalice.utils import to_cfn_resource_name

from chalicelib.core.settings import Settings
from chalicelib.counters import reads as counters
from chalicelib.events import ingest as events
from tests.deploy.conftest import PROJECT, app_imports_isolated, copy_project
from tools import mappings, resources, stage, vendor

STAGE = "dev"
BIN = Path(sys.executable).parent
REGISTRY = ("pypi.org", 443)
CACHE = Path(tempfile.gettempdir()) / "tally-chalice-deployments"


def registry_reachable() -> bool:
    try:
        socket.create_connection(REGISTRY, timeout=5).close()
        return True
    except OSError:
        return False


def run(command: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    project = copy_project(tmp_path_factory.mktemp("package") / "project")
    CACHE.mkdir(exist_ok=True)
    (project / ".chalice" / "deployments").symlink_to(CACHE)  # Chalice caches the wheels' zip here
    template = project / "build" / "resources.json"
    for tool in (
        ["tools.iam_policy", "--stage", STAGE],
        ["tools.cfn_template", "--stage", STAGE, "--output", str(template)],
    ):
        generated = run([sys.executable, "-m", *tool, "--project-dir", str(project)], PROJECT)
        assert generated.returncode == 0, generated.stderr
    packaged = run(
        [str(BIN / "chalice"), "package", "--stage", STAGE, "--merge-template", str(template), "out"],
        project,
        AWS_DEFAULT_REGION="us-east-1",
    )
    if packaged.returncode != 0:
        if not registry_reachable():
            pytest.skip(f"chalice package needs the package registry ({REGISTRY[0]}), which is unreachable")
        pytest.fail(f"chalice package failed:\n{packaged.stdout}\n{packaged.stderr}")
    return project


def template(package: Path) -> dict[str, Any]:
    return json.loads((package / "out" / "sam.json").read_text())


def test_given_dev_stage_when_packaged_then_cfn_lint_accepts_the_template(package: Path) -> None:
    linted = run([str(BIN / "cfn-lint"), "--", str(package / "out" / "sam.json")], package)

    assert linted.returncode == 0, linted.stdout + linted.stderr


def test_given_dev_stage_when_packaged_then_resources_match_the_definition_and_are_wired_by_ref(
    package: Path,
) -> None:
    settings = stage.stage_settings(STAGE, package)
    definition = resources.for_settings(settings)
    resources_by_type: dict[str, dict[str, Any]] = {}
    for lid, resource in template(package)["Resources"].items():
        resources_by_type.setdefault(resource["Type"], {})[lid] = resource["Properties"]

    tables = {p["TableName"]: p for p in resources_by_type["AWS::DynamoDB::Table"].values()}
    queues = {p["QueueName"]: p for p in resources_by_type["AWS::SQS::Queue"].values()}
    buckets = {p["BucketName"] for p in resources_by_type["AWS::S3::Bucket"].values()}
    assert set(tables) == {t.name for t in definition.tables}
    assert set(queues) == {n for q in definition.queues for n in (q.name, q.dead_letter_queue)} | set(
        definition.failure_queues
    )
    assert buckets == set(definition.buckets)
    secrets = {p["Name"]: p for p in resources_by_type["AWS::SecretsManager::Secret"].values()}
    assert set(secrets) == set(definition.secrets)
    for secret in secrets.values():
        # CloudFormation makes the value; the template never holds one.
        assert "SecretString" not in secret and secret["GenerateSecretString"]["PasswordLength"] >= 32
    for table in definition.tables:
        assert tables[table.name]["TimeToLiveSpecification"] == {"AttributeName": table.ttl_attribute, "Enabled": True}
        assert ("StreamSpecification" in tables[table.name]) == table.stream
    for queue in definition.queues:
        assert queues[queue.name]["VisibilityTimeout"] == queue.visibility_timeout
        dlq_id = queues[queue.name]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
        assert resources_by_type["AWS::SQS::Queue"][dlq_id]["QueueName"] == queue.dead_letter_queue

    functions = resources_by_type["AWS::Serverless::Function"]
    stream_source = functions["OnEventRecords"]["Events"]["OnEventRecordsDynamodbEventSource"]["Properties"]
    assert stream_source["Stream"] == {"Fn::GetAtt": ["EventsTable", "StreamArn"]}
    main_queue_ids = {lid for lid, q in resources_by_type["AWS::SQS::Queue"].items() if "RedrivePolicy" in q}
    wired = set()
    for source in app_sqs_sources():
        function = functions[to_cfn_resource_name(source.name)]
        (event,) = function["Events"].values()
        assert event["Type"] == "SQS"
        (queue_ref,) = event["Properties"]["Queue"].values()  # one intrinsic, not Chalice's and ours merged
        wired.add(queue_ref.removeprefix("${").removesuffix(".Arn}"))
    assert wired and wired <= main_queue_ids
    for properties in functions.values():
        variables = properties["Environment"]["Variables"]
        assert variables["EVENTS_TABLE"] == {"Ref": "EventsTable"}
        assert variables["EVENTS_STREAM_ARN"] == {"Fn::GetAtt": ["EventsTable", "StreamArn"]}
    policy = json.loads((package / ".chalice" / f"policy-{STAGE}.json").read_text())
    for role in resources_by_type["AWS::IAM::Role"].values():
        assert [p["PolicyDocument"] for p in role["Policies"]] == [policy]


def app_sqs_sources() -> list[Any]:
    from tools.cfn_template import load_app

    with app_imports_isolated():
        return [s for s in load_app(STAGE, PROJECT).app.event_sources if type(s).__name__ == "SQSEventConfig"]


@pytest.fixture
def moto_server() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


HANDLER_RUN = """
import json, sys
lambda_dir, modules, event = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
assert not [p for p in sys.path if "site-packages" in p], sys.path
sys.path.insert(0, lambda_dir)
import importlib
for name in modules:
    module = importlib.import_module(name)
    assert module.__file__.startswith(lambda_dir), (name, module.__file__)
import app
results = [app.on_event_records(event, None) for _ in range(2)]  # the batch, then its redelivery
print(json.dumps(results))
"""


def test_given_dev_stage_when_packaged_then_the_stream_mapping_is_pinned(package: Path) -> None:
    """Read back from `chalice package`'s template: the stream's event source carries every
    pinned setting (tools/mappings.py) and sends given-up batches to the stream-failures queue."""
    built = template(package)["Resources"]
    settings = stage.stage_settings(STAGE, package)
    functions = {lid: r["Properties"] for lid, r in built.items() if r["Type"] == "AWS::Serverless::Function"}

    (event,) = functions["OnEventRecords"]["Events"].values()
    source = event["Properties"]

    assert event["Type"] == "DynamoDB"
    assert source["ParallelizationFactor"] == 1
    assert source["TumblingWindowInSeconds"] == mappings.TUMBLING_WINDOW_SECONDS
    assert source["MaximumRetryAttempts"] == mappings.MAXIMUM_RETRY_ATTEMPTS
    assert source["MaximumRecordAgeInSeconds"] == mappings.MAXIMUM_RECORD_AGE_SECONDS
    assert source["BisectBatchOnFunctionError"] is True
    assert "FunctionResponseTypes" not in source  # the handler reports no batchItemFailures
    assert (source["BatchSize"], source["StartingPosition"]) == (settings.stream_batch_size, "TRIM_HORIZON")
    (queue_id, attribute) = source["DestinationConfig"]["OnFailure"]["Destination"]["Fn::GetAtt"]
    assert attribute == "Arn"
    assert built[queue_id]["Properties"]["QueueName"] == resources.stream_failures_queue(settings)
    # The SQS sources keep Chalice's settings: no partial batch responses (core/queues.py).
    for lid, function in functions.items():
        for other in function.get("Events", {}).values():
            if other["Type"] == "SQS":
                assert "FunctionResponseTypes" not in other["Properties"], lid


def test_given_the_zip_alone_when_a_clean_python_imports_app_then_a_stream_batch_counts_once_on_moto(
    package: Path, tmp_path: Path, moto_server: str
) -> None:
    lambda_dir = tmp_path / "lambda"
    with zipfile.ZipFile(package / "out" / "deployment.zip") as archive:
        archive.extractall(lambda_dir)
    env = {
        **stage.stage_environment(STAGE, package),
        "AWS_ENDPOINT_URL": moto_server,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    settings = Settings.from_env(env)
    session = boto3.session.Session(
        region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    dynamodb = session.client("dynamodb", endpoint_url=moto_server)
    outputs = resources.ensure(
        dynamodb,
        session.client("sqs", endpoint_url=moto_server),
        session.client("s3", endpoint_url=moto_server),
        resources.for_settings(settings),
        "us-east-1",
    )
    env["EVENTS_STREAM_ARN"] = outputs[settings.events_table]
    now = int(time.time() * 1000)
    item = events.to_item(events.Event("deploy.check", "e-1", now, 90_000), now, settings)
    record = {
        "eventID": "1",
        "eventName": "INSERT",
        "eventSource": "aws:dynamodb",
        "eventSourceARN": env["EVENTS_STREAM_ARN"],
        "dynamodb": {"SequenceNumber": "1", "NewImage": {k: TypeSerializer().serialize(v) for k, v in item.items()}},
    }
    modules = [
        line.split("==")[0].strip().lower().replace("-", "_")
        for line in (package / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]

    ran = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            HANDLER_RUN,
            str(lambda_dir),
            json.dumps(modules),
            # The pinned tumbling window makes Lambda name the shard (docs/guarantees.md).
            json.dumps({"Records": [record], "shardId": "shardId-00000001795000000000-00000001", "state": {}}),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert ran.returncode == 0, ran.stderr
    assert "numpy" in modules
    minute = now // 60_000
    count = counters.count_window(dynamodb, settings, "deploy.check", minute - 59, minute, now)
    assert count.count == 1


def test_given_dev_stage_when_packaged_then_the_api_has_the_authorizers_gateway_responses_and_throttling(
    package: Path,
) -> None:
    settings = stage.stage_settings(STAGE, package)
    api = template(package)["Resources"]["RestAPI"]["Properties"]
    swagger = api["DefinitionBody"]

    authorizers = {name: s["x-amazon-apigateway-authorizer"] for name, s in swagger["securityDefinitions"].items()}
    assert set(authorizers) == {"ingest_key", "read_key", "admin_key"}
    assert {a["type"] for a in authorizers.values()} == {"token"}
    assert {a["authorizerResultTtlInSeconds"] for a in authorizers.values()} == {settings.key_cache_seconds}
    responses = swagger["x-amazon-apigateway-gateway-responses"]
    assert {responses[t]["statusCode"] for t in ("UNAUTHORIZED", "ACCESS_DENIED", "THROTTLED")} == {"401", "403", "429"}
    assert responses["MISSING_AUTHENTICATION_TOKEN"]["statusCode"] == "404"
    assert swagger["paths"]["/counters/{counter}"]["get"]["security"] == [{"read_key": []}]
    assert "security" not in swagger["paths"]["/beacon/views"]["post"]
    assert api["MethodSettings"][0]["ThrottlingRateLimit"] == settings.throttle_rate_limit
    functions = template(package)["Resources"]
    configured = stage.load_config(package)["stages"][STAGE]["lambda_functions"]
    assert (
        functions["APIHandler"]["Properties"]["ReservedConcurrentExecutions"]
        == configured["api_handler"]["reserved_concurrency"]
    )
    assert (
        functions["IngestKey"]["Properties"]["ReservedConcurrentExecutions"]
        == configured["ingest_key"]["reserved_concurrency"]
    )


def run_isolated(lambda_dir: Path, script: str) -> subprocess.CompletedProcess[str]:
    """`script` run by a Python that sees the unpacked package and nothing else (no site-packages)."""
    return subprocess.run(
        [sys.executable, "-I", "-S", "-c", f"import sys; sys.path.insert(0, {str(lambda_dir)!r}); {script}"],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_given_the_zip_when_unpacked_then_the_dashboard_and_its_vendored_library_with_license_are_inside(
    package: Path, tmp_path: Path
) -> None:
    with zipfile.ZipFile(package / "out" / "deployment.zip") as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path / "lambda")
    for pinned in vendor.load_pins():
        for output in pinned["files"].values():
            assert f"chalicelib/dashboard/vendor/{output}" in names, f"{output} missing: run `make vendor` first"
    for static in ("index.html", "dashboard.js", "dashboard.css", "sites.js"):
        assert f"chalicelib/dashboard/static/{static}" in names
    assert "chalicelib/sites/static/tally.js" in names  # GET /tally.js
    # The page is assembled from the unpacked files alone, by a Python that sees nothing else.
    script = "from chalicelib.dashboard import assets; print(assets.page().body)"
    shown = run_isolated(tmp_path / "lambda", script)
    assert shown.returncode == 0, shown.stderr
    assert 'src="dashboard/uPlot.iife.min.js?v=' in shown.stdout  # relative to the page (its base)


def test_given_the_zip_when_unpacked_then_zoneinfo_finds_every_zone_without_the_system_database(
    package: Path, tmp_path: Path
) -> None:
    # A Lambda runtime image need not carry /usr/share/zoneinfo: the zones come from the
    # packaged tzdata, which zoneinfo falls back to when its search path is empty.
    with zipfile.ZipFile(package / "out" / "deployment.zip") as archive:
        archive.extractall(tmp_path / "lambda")
    script = (
        "import zoneinfo; zoneinfo.reset_tzpath(to=()); from datetime import datetime; "
        "print(datetime(2026, 11, 26, tzinfo=zoneinfo.ZoneInfo('Asia/Kathmandu')).utcoffset())"
    )
    shown = run_isolated(tmp_path / "lambda", script)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == "5:45:00"
