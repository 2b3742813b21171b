"""Both deploy paths give the tracker's function (`beacon_url`) its public function URL with the
CORS of tools/function_url.py: the template (`AWS::Lambda::Url` and the two permissions Lambda
requires of a public URL) and `make deploy`'s step after `chalice deploy` (on moto)."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from chalice.utils import to_cfn_resource_name

from tests.deploy.conftest import app_imports_isolated
from tools import cfn_template, function_url, provision

STAGE = "dev"


@pytest.fixture
def template(project: Path) -> dict[str, Any]:
    with app_imports_isolated():
        built: dict[str, Any] = cfn_template.build(STAGE, project)
    return built


def test_given_the_template_then_the_tracker_function_has_a_public_url_with_its_cors(
    template: dict[str, Any],
) -> None:
    function_id = to_cfn_resource_name(function_url.FUNCTION)
    resources = template["Resources"]
    urls = {lid: r["Properties"] for lid, r in resources.items() if r.get("Type") == "AWS::Lambda::Url"}
    assert list(urls) == [f"{function_id}Url"]
    url = urls[f"{function_id}Url"]
    assert url["TargetFunctionArn"] == {"Fn::GetAtt": [function_id, "Arn"]}
    assert url["AuthType"] == "NONE"
    assert url["Cors"] == {
        "AllowOrigins": ["*"],
        "AllowMethods": ["GET", "POST"],
        "AllowHeaders": ["content-type"],
        "AllowCredentials": False,
        "MaxAge": 600,
    }
    permissions = [r["Properties"] for r in resources.values() if r.get("Type") == "AWS::Lambda::Permission"]
    url_permission = [p for p in permissions if p["Action"] == "lambda:InvokeFunctionUrl"]
    invoke_permission = [p for p in permissions if p["Action"] == "lambda:InvokeFunction"]
    assert url_permission == [
        {
            "FunctionName": {"Fn::GetAtt": [function_id, "Arn"]},
            "Action": "lambda:InvokeFunctionUrl",
            "Principal": "*",
            "FunctionUrlAuthType": "NONE",
        }
    ]
    assert [(p["FunctionName"], p["Principal"], p["InvokedViaFunctionUrl"]) for p in invoke_permission] == [
        ({"Fn::GetAtt": [function_id, "Arn"]}, "*", True)
    ]
    assert template["Outputs"]["BeaconFunctionUrl"] == {"Value": {"Fn::GetAtt": [f"{function_id}Url", "FunctionUrl"]}}
    # The function Chalice writes gets the stage's resources like every other one.
    assert resources[function_id]["Properties"]["Environment"]["Variables"]["EVENTS_TABLE"] == {"Ref": "EventsTable"}


@pytest.fixture
def moto() -> Iterator[Any]:
    from moto import mock_aws

    with mock_aws():
        yield boto3.session.Session(region_name="us-east-1")


def chalice_deployed_function(session: Any, project: Path) -> str:
    """What `chalice deploy` leaves for the tracker's function: the function, recorded in .chalice/deployed."""
    role = session.client("iam").create_role(RoleName="tally-dev", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("app.py", "def handler(event, context):\n    return {}\n")
    name = f"tally-{STAGE}-{function_url.FUNCTION}"
    arn = session.client("lambda").create_function(
        FunctionName=name, Runtime="python3.11", Role=role, Handler="app.handler", Code={"ZipFile": code.getvalue()}
    )["FunctionArn"]
    deployed = {"resources": [{"name": function_url.FUNCTION, "resource_type": "lambda_function", "lambda_arn": arn}]}
    (project / ".chalice" / "deployed").mkdir(parents=True, exist_ok=True)
    (project / ".chalice" / "deployed" / f"{STAGE}.json").write_text(json.dumps(deployed))
    return name


def test_given_chalice_deployed_the_function_when_configured_twice_then_one_public_url_with_its_cors(
    moto: Any, project: Path
) -> None:
    name = chalice_deployed_function(moto, project)
    # moto keeps the statements but not the condition FunctionUrlAuthType makes of them: the
    # requests themselves are checked.
    added: list[dict[str, Any]] = []
    moto.events.register("provide-client-params.lambda.AddPermission", lambda params, **_: added.append(dict(params)))

    first = provision.configure_function_url(STAGE, moto, None, project)
    second = provision.configure_function_url(STAGE, moto, None, project)

    lambda_client = moto.client("lambda")
    config = lambda_client.get_function_url_config(FunctionName=name)
    assert first == second == config["FunctionUrl"]
    assert config["AuthType"] == "NONE"
    assert config["Cors"] == function_url.CORS
    statements = json.loads(lambda_client.get_policy(FunctionName=name)["Policy"])["Statement"]
    assert sorted(s["Action"] for s in statements) == ["lambda:InvokeFunction", "lambda:InvokeFunctionUrl"]
    assert sorted(
        (a["Action"], a["Principal"], a.get("FunctionUrlAuthType"), a.get("InvokedViaFunctionUrl")) for a in added
    ) == [
        ("lambda:InvokeFunction", "*", None, True),
        ("lambda:InvokeFunctionUrl", "*", "NONE", None),
    ]
