"""IAM's evaluation of an identity policy (wildcards, Deny, Not*) and what each call asks of it."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from botocore import xform_name

from tools import aws_operations, iam_evaluator
from tools.iam_evaluator import Decision, Request, UnsupportedPolicyError, decide, required

REGION, ACCOUNT = "us-east-1", "123456789012"
TABLE = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/t"


def allow(action: Any, resource: Any, **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **extra}


def deny(action: Any, resource: Any) -> dict[str, Any]:
    return {"Effect": "Deny", "Action": action, "Resource": resource}


def policy(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


# -- evaluation -------------------------------------------------------------------------------


def test_given_no_statement_for_the_action_then_implicitly_denied() -> None:
    assert decide(policy(allow("dynamodb:GetItem", TABLE)), "dynamodb:PutItem", TABLE) is Decision.IMPLICIT_DENY
    assert decide(policy(), "dynamodb:GetItem", TABLE) is Decision.IMPLICIT_DENY


@pytest.mark.parametrize(
    ("pattern", "action", "allowed"),
    [
        ("dynamodb:GetItem", "dynamodb:GetItem", True),
        ("dynamodb:getitem", "DynamoDB:GetItem", True),  # action names are case-insensitive
        ("dynamodb:*", "dynamodb:BatchWriteItem", True),
        ("dynamodb:Get*", "dynamodb:GetRecords", True),
        ("dynamodb:Get*", "dynamodb:BatchGetItem", False),
        ("dynamodb:?etItem", "dynamodb:GetItem", True),
        ("dynamodb:?etItem", "dynamodb:PutItems", False),
        ("*", "s3:GetObject", True),
        ("sqs:SendMessage", "sqs:SendMessageBatch", False),  # no prefix matching without a wildcard
        ("dynamodb:Query", "dynamodb:Quer", False),
    ],
)
def test_given_an_action_pattern_then_matched_as_iam_matches_actions(pattern: str, action: str, allowed: bool) -> None:
    assert decide(policy(allow(pattern, TABLE)), action, TABLE).allowed is allowed


@pytest.mark.parametrize(
    ("pattern", "resource", "allowed"),
    [
        (TABLE, TABLE, True),
        (TABLE, TABLE.upper(), False),  # ARNs are case-sensitive
        (TABLE, f"{TABLE}/index/by-x", False),
        (f"{TABLE}/index/*", f"{TABLE}/index/by-x", True),
        (f"{TABLE}/stream/*", f"{TABLE}/stream/2026-11-21T00:00:00.000", True),  # a trailing * crosses colons
        ("arn:aws:s3:::b/*", "arn:aws:s3:::b/reports/2026/x.json", True),  # and slashes
        ("arn:aws:s3:::b/*", "arn:aws:s3:::b", False),
        ("arn:aws:s3:::b", "arn:aws:s3:::b/k", False),
        ("arn:aws:sqs:*:123456789012:q", "arn:aws:sqs:eu-west-1:123456789012:q", True),
        ("arn:aws:sqs:us-east-1:*:q", "arn:aws:sqs:us-east-1:999999999999:q", True),
        ("arn:aws:sqs:us-east-1:123456789012:q", "arn:aws:sqs:us-east-1:123456789012:q-dlq", False),
        ("arn:aws:sqs:us-east-1:123456789012:q*", "arn:aws:sqs:us-east-1:123456789012:q-dlq", True),
        ("arn:aws:sqs:us-east-1:123456789012:q?dlq", "arn:aws:sqs:us-east-1:123456789012:q-dlq", True),
        # Inside a segment a * does not cross a colon; at a segment's end it may.
        ("arn:aws:logs:r:a:log-group:/l/f*x", "arn:aws:logs:r:a:log-group:/l/f:log-stream:x", False),
        ("arn:aws:logs:r:a:log-group:/l/f*", "arn:aws:logs:r:a:log-group:/l/f-1:log-stream:x", True),
        ("arn:aws:logs:r:a:log-group:/l/f?x", "arn:aws:logs:r:a:log-group:/l/f:x", False),
        ("*", "arn:aws:anything:::at/all", True),
    ],
)
def test_given_a_resource_pattern_then_matched_as_iam_matches_arns(pattern: str, resource: str, allowed: bool) -> None:
    assert decide(policy(allow("dynamodb:GetItem", pattern)), "dynamodb:GetItem", resource).allowed is allowed


def test_given_an_allow_and_a_matching_deny_then_the_deny_wins_whatever_their_order() -> None:
    statements = [allow("dynamodb:*", "*"), deny("dynamodb:PutItem", TABLE)]
    for ordered in (statements, statements[::-1]):
        assert decide(policy(*ordered), "dynamodb:PutItem", TABLE) is Decision.EXPLICIT_DENY
        assert decide(policy(*ordered), "dynamodb:GetItem", TABLE) is Decision.ALLOWED
        assert decide(policy(*ordered), "dynamodb:PutItem", f"{TABLE}2") is Decision.ALLOWED


def test_given_a_deny_alone_then_it_allows_nothing() -> None:
    assert decide(policy(deny("dynamodb:PutItem", TABLE)), "dynamodb:GetItem", TABLE) is Decision.IMPLICIT_DENY


def test_given_not_action_and_not_resource_then_they_match_everything_else() -> None:
    everything_but_deletes = policy({"Effect": "Allow", "NotAction": "dynamodb:Delete*", "Resource": TABLE})
    assert decide(everything_but_deletes, "dynamodb:PutItem", TABLE).allowed
    assert not decide(everything_but_deletes, "dynamodb:DeleteItem", TABLE).allowed
    other_tables = policy({"Effect": "Deny", "Action": "*", "NotResource": TABLE}, allow("*", "*"))
    assert decide(other_tables, "dynamodb:PutItem", TABLE).allowed
    assert decide(other_tables, "dynamodb:PutItem", f"{TABLE}2") is Decision.EXPLICIT_DENY


def test_given_one_statement_not_in_a_list_and_single_strings_then_read_as_a_list_of_one() -> None:
    one = {"Version": "2012-10-17", "Statement": allow("sqs:SendMessage", "arn:aws:sqs:r:a:q")}
    assert decide(one, "sqs:SendMessage", "arn:aws:sqs:r:a:q").allowed


def test_given_a_condition_or_a_policy_variable_then_refused_rather_than_guessed() -> None:
    with pytest.raises(UnsupportedPolicyError, match="Condition"):
        decide(policy(allow("*", "*", Condition={"Bool": {"aws:SecureTransport": "true"}})), "s3:GetObject", "*")
    with pytest.raises(UnsupportedPolicyError, match="policy variable"):
        decide(policy(allow("s3:GetObject", "arn:aws:s3:::b/${aws:username}/*")), "s3:GetObject", "arn:aws:s3:::b/x")


def matches_by_definition(pattern: str, text: str) -> bool:
    """The documented rule, read literally: `?` is one character of a segment, `*` any run of a
    segment's characters, or of any characters when it is the last of its segment."""
    if not pattern:
        return not text
    head, rest = pattern[0], pattern[1:]
    if head == "*":
        crosses = not rest or rest[0] == ":"
        for taken in range(len(text) + 1):
            if not crosses and ":" in text[:taken]:
                return False
            if matches_by_definition(rest, text[taken:]):
                return True
        return False
    if not text:
        return False
    if head == "?":
        return text[0] != ":" and matches_by_definition(rest, text[1:])
    return head == text[0] and matches_by_definition(rest, text[1:])


def test_given_every_short_pattern_and_resource_then_the_matcher_agrees_with_the_documented_rule() -> None:
    patterns = ["".join(p) for n in range(1, 5) for p in itertools.product("a*?:", repeat=n)]
    texts = ["".join(t) for n in range(0, 6) for t in itertools.product("ab:", repeat=n)]
    disagreements = [
        (p, t)
        for p in patterns
        for t in texts
        if p != "*" and decide(policy(allow("x:Y", p)), "x:Y", t).allowed != matches_by_definition(p, t)
    ]
    assert disagreements == []
    assert all(decide(policy(allow("x:Y", "*")), "x:Y", t).allowed for t in texts)


# -- what each call asks ----------------------------------------------------------------------


def asks(service: str, operation: str, **params: Any) -> list[Request]:
    return required(service, operation, params, region=REGION, account=ACCOUNT)


def test_given_item_calls_then_their_own_action_on_the_table_and_a_query_on_an_index_on_the_index() -> None:
    assert asks("dynamodb", "GetItem", TableName="t") == [Request("dynamodb:GetItem", TABLE)]
    assert asks("dynamodb", "UpdateItem", TableName=TABLE) == [Request("dynamodb:UpdateItem", TABLE)]
    assert asks("dynamodb", "Query", TableName="t", IndexName="by-x") == [
        Request("dynamodb:Query", f"{TABLE}/index/by-x")
    ]
    assert asks("dynamodb", "Query", TableName="t") == [Request("dynamodb:Query", TABLE)]
    assert asks("dynamodb", "ListTables") == [Request("dynamodb:ListTables", "*")]


def test_given_batches_then_the_batch_action_on_every_table_named() -> None:
    items = {"t": [], "u": []}
    u = TABLE.replace("table/t", "table/u")
    assert asks("dynamodb", "BatchWriteItem", RequestItems=items) == [
        Request("dynamodb:BatchWriteItem", TABLE),
        Request("dynamodb:BatchWriteItem", u),
    ]
    assert asks("dynamodb", "BatchGetItem", RequestItems=items) == [
        Request("dynamodb:BatchGetItem", TABLE),
        Request("dynamodb:BatchGetItem", u),
    ]


def test_given_a_transaction_then_each_item_under_its_own_action_on_its_table() -> None:
    items = [
        {"ConditionCheck": {"TableName": "t", "Key": {}, "ConditionExpression": "x"}},
        {"Put": {"TableName": "u", "Item": {}}},
        {"Update": {"TableName": "t", "Key": {}, "UpdateExpression": "x"}},
        {"Delete": {"TableName": "t", "Key": {}}},
    ]
    u = TABLE.replace("table/t", "table/u")
    assert asks("dynamodb", "TransactWriteItems", TransactItems=items) == [
        Request("dynamodb:ConditionCheckItem", TABLE),
        Request("dynamodb:PutItem", u),
        Request("dynamodb:UpdateItem", TABLE),
        Request("dynamodb:DeleteItem", TABLE),
    ]
    assert asks("dynamodb", "TransactGetItems", TransactItems=[{"Get": {"TableName": "u", "Key": {}}}]) == [
        Request("dynamodb:GetItem", u)
    ]


@pytest.mark.parametrize(
    "url",
    [
        f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/q",
        f"http://127.0.0.1:5000/{ACCOUNT}/q",
        f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/q/",
    ],
)
def test_given_queue_calls_then_the_queue_arn_from_its_url_and_batches_under_the_single_action(url: str) -> None:
    queue = f"arn:aws:sqs:{REGION}:{ACCOUNT}:q"
    assert asks("sqs", "SendMessageBatch", QueueUrl=url, Entries=[]) == [Request("sqs:SendMessage", queue)]
    assert asks("sqs", "DeleteMessageBatch", QueueUrl=url, Entries=[]) == [Request("sqs:DeleteMessage", queue)]
    assert asks("sqs", "GetQueueAttributes", QueueUrl=url) == [Request("sqs:GetQueueAttributes", queue)]


def test_given_get_queue_url_then_the_named_queue_in_the_callers_account_or_the_owners() -> None:
    assert asks("sqs", "GetQueueUrl", QueueName="q-dlq") == [
        Request("sqs:GetQueueUrl", f"arn:aws:sqs:{REGION}:{ACCOUNT}:q-dlq")
    ]
    assert asks("sqs", "GetQueueUrl", QueueName="q", QueueOwnerAWSAccountId="111122223333") == [
        Request("sqs:GetQueueUrl", f"arn:aws:sqs:{REGION}:111122223333:q")
    ]


def test_given_object_and_bucket_calls_then_objects_on_their_key_and_listings_on_the_bucket() -> None:
    assert asks("s3", "GetObject", Bucket="b", Key="r/1.json") == [Request("s3:GetObject", "arn:aws:s3:::b/r/1.json")]
    assert asks("s3", "HeadObject", Bucket="b", Key="k") == [Request("s3:GetObject", "arn:aws:s3:::b/k")]
    assert asks("s3", "PutObject", Bucket="b", Key="k", Body=b"") == [Request("s3:PutObject", "arn:aws:s3:::b/k")]
    assert asks("s3", "ListObjectsV2", Bucket="b") == [Request("s3:ListBucket", "arn:aws:s3:::b")]
    assert asks("s3", "DeleteObjects", Bucket="b", Delete={"Objects": [{"Key": "x"}, {"Key": "y"}]}) == [
        Request("s3:DeleteObject", "arn:aws:s3:::b/x"),
        Request("s3:DeleteObject", "arn:aws:s3:::b/y"),
    ]
    assert asks("s3", "CopyObject", Bucket="b", Key="k", CopySource={"Bucket": "c", "Key": "s"}) == [
        Request("s3:GetObject", "arn:aws:s3:::c/s"),
        Request("s3:PutObject", "arn:aws:s3:::b/k"),
    ]


def sample_params(operation: str) -> dict[str, Any]:
    if operation == "TransactGetItems":
        return {"TransactItems": [{"Get": {"TableName": "t"}}]}
    return {
        "TableName": "t",
        "RequestItems": {"t": []},
        "TransactItems": [{kind: {"TableName": "t"}} for kind in ("ConditionCheck", "Put", "Update")],
        "QueueUrl": f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/q",
        "QueueName": "q",
        "Bucket": "b",
        "Key": "k",
    }


def test_given_every_operation_the_policy_generator_knows_then_the_evaluator_asks_for_the_same_actions() -> None:
    """tools/aws_operations.py decides which actions the role gets; this module which ones a call
    needs: they must agree, or the local checks would not be those of the deployed role."""
    for (service, snake), granted in aws_operations.IAM_ACTIONS.items():
        operation = next(op for op in _operations(service) if xform_name(op) == snake)
        asked = {
            r.action for r in required(service, operation, sample_params(operation), region=REGION, account=ACCOUNT)
        }
        assert asked == set(granted), (service, operation, asked, granted)


def _operations(service: str) -> list[str]:
    import botocore.session

    return list(botocore.session.get_session().get_service_model(service).operation_names)


def test_given_a_queue_url_then_its_arn_names_its_account_and_name() -> None:
    assert iam_evaluator.queue_arn("http://localhost:4566/000000000000/tally-views-dlq", "eu-west-1") == (
        "arn:aws:sqs:eu-west-1:000000000000:tally-views-dlq"
    )
