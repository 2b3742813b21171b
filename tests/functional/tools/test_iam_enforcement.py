"""The role policy enforced on the app's clients (tools/iam_enforcement.py): what it refuses, how
each service answers, and that the app's paths work under the generated policy and fail as on
AWS where the policy lacks what they call."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from chalicelib.core import quarantine, queues
from chalicelib.core.errors import StorageError
from chalicelib.core.settings import Settings
from chalicelib.views import batches as views_batches
from tests.functional.helpers import deliver, get, queue_url, receive_all
from tools import iam_enforcement, iam_policy
from tools.iam_enforcement import Role

SETTINGS = Settings()
ACCOUNT = "123456789012"
REGION = SETTINGS.aws_region
VIEWS_DLQ = f"{SETTINGS.views_queue}-dlq"


@pytest.fixture(autouse=True)
def fresh_queue_cache() -> Iterator[None]:
    queues.queue_url.cache_clear()
    queues.dead_letter_url.cache_clear()
    yield
    queues.queue_url.cache_clear()
    queues.dead_letter_url.cache_clear()


def without(policy: dict[str, Any], sid: str, action: str) -> dict[str, Any]:
    """`policy` with `action` taken out of statement `sid`."""
    narrowed = copy.deepcopy(policy)
    for statement in narrowed["Statement"]:
        if statement["Sid"] == sid:
            assert action in statement["Action"], (sid, action)
            statement["Action"] = [a for a in statement["Action"] if a != action]
    return narrowed


def with_deny(policy: dict[str, Any], action: str, resource: str) -> dict[str, Any]:
    return {**policy, "Statement": [*policy["Statement"], {"Effect": "Deny", "Action": action, "Resource": resource}]}


def table_arn(name: str) -> str:
    return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"


def guarded(service: str, role: Role) -> Any:
    client = boto3.client(service, region_name=REGION)
    iam_enforcement.attach(client, role)
    return client


def error_of(exc: ClientError) -> tuple[str, int]:
    return exc.response["Error"]["Code"], exc.response["ResponseMetadata"]["HTTPStatusCode"]


# -- the hook ---------------------------------------------------------------------------------


def test_given_calls_inside_and_outside_the_role_then_those_outside_refused_as_each_service_answers_and_never_made(
    aws: Any, role: Role
) -> None:
    aws.dynamodb.create_table(
        TableName="other",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    aws.s3.create_bucket(Bucket="other-bucket")
    dynamodb, sqs, s3 = (guarded(service, role) for service in ("dynamodb", "sqs", "s3"))
    uniques_dlq = aws.sqs.get_queue_url(QueueName=f"{SETTINGS.uniques_queue}-dlq")["QueueUrl"]

    dynamodb.put_item(TableName=SETTINGS.counts_table, Item={"pk": {"S": "p"}, "sk": {"S": "s"}})
    with pytest.raises(ClientError) as denied_table:
        dynamodb.put_item(TableName="other", Item={"pk": {"S": "p"}})
    with pytest.raises(ClientError) as denied_queue:
        sqs.send_message(QueueUrl=uniques_dlq, MessageBody="x")
    with pytest.raises(ClientError) as denied_bucket:
        s3.put_object(Bucket="other-bucket", Key="k", Body=b"x")

    assert error_of(denied_table.value) == ("AccessDeniedException", 400)
    assert error_of(denied_queue.value) == ("AccessDenied", 403)
    assert error_of(denied_bucket.value) == ("AccessDenied", 403)
    assert denied_table.value.response["Error"]["Message"] == (
        f"User: arn:aws:sts::{ACCOUNT}:assumed-role/tally/tally is not authorized to perform: dynamodb:PutItem "
        f"on resource: {table_arn('other')} because no identity-based policy allows the dynamodb:PutItem action"
    )
    assert f"sqs:SendMessage on resource: arn:aws:sqs:{REGION}:{ACCOUNT}:{SETTINGS.uniques_queue}-dlq" in str(
        denied_queue.value
    )
    assert aws.dynamodb.scan(TableName="other")["Items"] == []
    assert "Messages" not in aws.sqs.receive_message(QueueUrl=uniques_dlq)
    assert aws.s3.list_objects_v2(Bucket="other-bucket").get("KeyCount") == 0
    assert "Item" in aws.dynamodb.get_item(TableName=SETTINGS.counts_table, Key={"pk": {"S": "p"}, "sk": {"S": "s"}})


def test_given_an_explicit_deny_then_it_refuses_what_the_policy_otherwise_allows(aws: Any, role: Role) -> None:
    role.policy = with_deny(role.policy, "dynamodb:Update*", table_arn(SETTINGS.counts_table))
    dynamodb = guarded("dynamodb", role)
    key = {"pk": {"S": "p"}, "sk": {"S": "s"}}

    dynamodb.put_item(TableName=SETTINGS.counts_table, Item=key)
    with pytest.raises(ClientError) as denied:
        dynamodb.update_item(
            TableName=SETTINGS.counts_table,
            Key=key,
            UpdateExpression="SET n = :n",
            ExpressionAttributeValues={":n": {"N": "1"}},
        )

    assert "with an explicit deny in an identity-based policy" in denied.value.response["Error"]["Message"]
    assert "n" not in aws.dynamodb.get_item(TableName=SETTINGS.counts_table, Key=key)["Item"]


def test_given_a_missing_object_when_read_without_list_bucket_then_403_as_s3_answers_and_404_with_it(
    aws: Any, role: Role
) -> None:
    s3 = guarded("s3", role)
    bucket = SETTINGS.reports_bucket

    with pytest.raises(ClientError) as got:
        s3.get_object(Bucket=bucket, Key="reports/missing.json")
    with pytest.raises(ClientError) as headed:
        s3.head_object(Bucket=bucket, Key="reports/missing.json")
    assert error_of(got.value) == ("AccessDenied", 403)
    assert error_of(headed.value) == ("403", 403)

    role.policy = {
        **role.policy,
        "Statement": [
            *role.policy["Statement"],
            {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{bucket}"},
        ],
    }
    with pytest.raises(ClientError) as listed:
        s3.get_object(Bucket=bucket, Key="reports/missing.json")
    assert error_of(listed.value) == ("NoSuchKey", 404)


def test_given_the_tests_clients_then_the_tests_own_calls_pass_and_chalicelib_calls_with_them_are_judged(
    aws: Any, role: Role
) -> None:
    role.policy = with_deny(role.policy, "dynamodb:*", "*")

    aws.dynamodb.put_item(TableName=SETTINGS.counts_table, Item={"pk": {"S": "p"}, "sk": {"S": "s"}})
    with pytest.raises(StorageError) as failed:
        quarantine.put(aws.dynamodb, SETTINGS, quarantine.EVENTS_STREAM, "id", "{}", "why", 0)

    assert isinstance(failed.value.__cause__, ClientError)
    assert error_of(failed.value.__cause__) == ("AccessDeniedException", 400)


# -- the app under the role -------------------------------------------------------------------


def test_given_a_route_whose_write_the_role_does_not_allow_then_503_in_the_apps_error_shape(
    client: Any, role: Role
) -> None:
    role.policy = with_deny(role.policy, "dynamodb:*", table_arn(SETTINGS.events_table))

    response = client.http.post(
        "/events",
        headers={"Content-Type": "application/json"},
        body=json.dumps({"events": [{"counter": "signups"}]}),
    )

    assert response.status_code == 503, response.body
    assert response.json_body["Code"] == "ServiceUnavailable"


def test_given_the_authorizer_cannot_read_keys_then_no_request_gets_through(client: Any, role: Role) -> None:
    """The key's first request: no cached authorizer answer (tools/gateway.py) hides the refusal."""
    role.policy = without(role.policy, "Tables", "dynamodb:GetItem")

    response = client.http.get("/counters/signups")

    assert response.status_code == 503, response.body
    assert response.json_body["Code"] == "ServiceUnavailable"


def send_poison(aws: Any) -> list[dict[str, Any]]:
    aws.sqs.send_message(QueueUrl=queue_url(aws), MessageBody="not json")
    return receive_all(aws)


def dead_letters(aws: Any) -> list[str]:
    return [m["Body"] for m in receive_all(aws, VIEWS_DLQ)]


def test_given_the_generated_policy_then_views_poison_is_set_aside_and_quarantine_counts_read_the_dead_letter_queue(
    client: Any, aws: Any, app_module: Any, clock: Any
) -> None:
    result = deliver(client, send_poison(aws))
    counts = {s["source"]: s["records"] for s in get(client, "/quarantine/counts").json_body["sources"]}

    assert result["quarantined"] == 1
    assert counts["views-dead-letter-queue"] == 1
    assert dead_letters(aws) == ["not json"]


@pytest.mark.parametrize(
    ("action", "poison_set_aside", "counted"),
    [("sqs:GetQueueUrl", False, False), ("sqs:SendMessage", False, True), ("sqs:GetQueueAttributes", True, False)],
)
def test_given_the_role_without_one_dead_letter_right_then_the_path_needing_it_fails_as_on_aws(
    client: Any, aws: Any, app_module: Any, clock: Any, role: Role, action: str, poison_set_aside: bool, counted: bool
) -> None:
    """Each of the three rights on the views dead-letter queue is needed: without it the poison
    stays in the views queue for redelivery (the handler raises) or the counts answer 503."""
    assert action in iam_policy.DEAD_LETTER_ACTIONS
    role.policy = without(role.policy, "DeadLetters", action)
    messages = send_poison(aws)

    if poison_set_aside:
        assert deliver(client, messages)["quarantined"] == 1
    else:
        with pytest.raises(views_batches.BatchIncompleteError):
            deliver(client, messages)
    response = client.http.get("/quarantine/counts")

    assert dead_letters(aws) == (["not json"] if poison_set_aside else [])
    assert response.status_code == (200 if counted else 503), response.body


def test_given_a_fake_injected_into_app_code_then_what_it_forwards_is_judged_but_a_helper_playing_aws_is_not(
    aws: Any, role: Role
) -> None:
    from tests.functional.stream_fixtures import stored_event_records

    role.policy = with_deny(role.policy, "dynamodb:*", "*")
    streamed: list[Any] = []

    class Forwarding:
        def put_item(self, **kwargs: Any) -> Any:
            streamed.append(stored_event_records(aws.dynamodb))  # a Scan: the stream's part
            return aws.dynamodb.put_item(**kwargs)  # the app's call, through the fake

    with pytest.raises(StorageError) as failed:
        quarantine.put(Forwarding(), SETTINGS, quarantine.EVENTS_STREAM, "id", "{}", "why", 0)

    assert streamed == [[]]
    assert error_of(failed.value.__cause__) == ("AccessDeniedException", 400)  # type: ignore[arg-type]
