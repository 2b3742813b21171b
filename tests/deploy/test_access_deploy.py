"""The deploy paths carry what access needs: gateway responses, throttling, authorizers, a first key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from chalicelib.access import api_keys
from chalicelib.access import store as key_store
from tests.deploy.conftest import app_imports_isolated
from tools import cfn_template, gateway, provision, stage

STAGE = "dev"
REFUSALS = {"UNAUTHORIZED": "401", "ACCESS_DENIED": "403", "MISSING_AUTHENTICATION_TOKEN": "404", "THROTTLED": "429"}


@pytest.fixture
def moto() -> Iterator[Any]:
    from moto import mock_aws

    with mock_aws():
        yield boto3.session.Session(region_name="us-east-1")


def chalice_deployed_api(session: Any, project: Path) -> str:
    """What `chalice deploy` leaves: a REST API with a stage, recorded in .chalice/deployed."""
    apigateway = session.client("apigateway")
    api = apigateway.create_rest_api(name="tally")["id"]
    root = apigateway.get_resources(restApiId=api)["items"][0]["id"]
    apigateway.put_method(restApiId=api, resourceId=root, httpMethod="GET", authorizationType="NONE")
    apigateway.put_integration(restApiId=api, resourceId=root, httpMethod="GET", type="MOCK")
    apigateway.create_deployment(restApiId=api, stageName="api")
    deployed = {"resources": [{"name": "rest_api", "resource_type": "rest_api", "rest_api_id": api}]}
    (project / ".chalice" / "deployed").mkdir(parents=True)
    (project / ".chalice" / "deployed" / f"{STAGE}.json").write_text(json.dumps(deployed))
    return str(api)


def assert_refusals(responses: dict[str, Any]) -> None:
    for response_type, status in REFUSALS.items():
        response = responses[response_type]
        assert response["statusCode"] == status
        assert response["responseParameters"]["gatewayresponse.header.Access-Control-Allow-Origin"] == (
            "method.request.header.Origin"
        )
        body = response["responseTemplates"]["application/json"]
        assert set(json.loads(body.replace("$context.authorizer.reason", "why"))) == {"Code", "Message"}


def test_given_a_chalice_deployed_api_when_configured_then_json_refusals_with_cors_and_stage_throttling(
    moto: Any, project: Path
) -> None:
    api = chalice_deployed_api(moto, project)
    settings = stage.stage_settings(STAGE, project)

    assert provision.configure_api(STAGE, moto, None, project) == api

    apigateway = moto.client("apigateway")
    responses = {r["responseType"]: r for r in apigateway.get_gateway_responses(restApiId=api)["items"]}
    assert_refusals(responses)
    limits = apigateway.get_stage(restApiId=api, stageName="api")["methodSettings"]["*/*"]
    assert (limits["throttlingRateLimit"], limits["throttlingBurstLimit"]) == (
        settings.throttle_rate_limit,
        settings.throttle_burst_limit,
    )


def test_given_a_new_stage_when_provisioned_twice_then_one_admin_key_printed_once_and_stored_hashed(
    moto: Any, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--stage", STAGE, "--project-dir", str(project), "--no-deploy", "--region", "us-east-1"]

    assert provision.main(args) == 0
    first = capsys.readouterr().out
    assert provision.main(args) == 0
    second = capsys.readouterr().out

    (line,) = [line for line in first.splitlines() if "first admin key" in line]
    key = line.rsplit(" ", 1)[-1]
    stored = list(key_store.all_keys(moto.client("dynamodb"), stage.stage_settings(STAGE, project)))
    assert "admin key" not in second
    assert [(r.id, r.scopes) for r in stored] == [(api_keys.key_id(api_keys.digest(key)), frozenset({"admin"}))]


def test_given_the_template_fragment_then_gateway_responses_throttling_and_authorizer_environment(
    project: Path,
) -> None:
    settings = stage.stage_settings(STAGE, project)

    with app_imports_isolated():
        built = cfn_template.build(STAGE, project)["Resources"]

    api = built["RestAPI"]["Properties"]
    assert_refusals(api["DefinitionBody"]["x-amazon-apigateway-gateway-responses"])
    assert api["MethodSettings"] == [
        {
            "ResourcePath": "/*",
            "HttpMethod": "*",
            "ThrottlingRateLimit": settings.throttle_rate_limit,
            "ThrottlingBurstLimit": settings.throttle_burst_limit,
        }
    ]
    for authorizer in ("IngestKey", "ReadKey", "AdminKey"):
        assert built[authorizer]["Properties"]["Environment"]["Variables"]["COUNTS_TABLE"] == {"Ref": "CountsTable"}
    assert set(gateway.swagger_responses()) == set(gateway.BY_TYPE)
