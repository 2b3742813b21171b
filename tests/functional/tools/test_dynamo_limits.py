"""DynamoDB's documented limits, enforced by the patched moto: each edge played on both sides.

Just under a limit is accepted, just over it is refused with the error DynamoDB gives
(docs/guarantees.md, "DynamoDB's limits, enforced by the emulator", quotes each limit).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from chalicelib.core import dynamo_limits
from chalicelib.core.item_sizes import item_size
from tests.functional.helpers import pk_sk_table

OVERFLOW = "Number overflow. Attempting to store a number with magnitude larger than supported range"
UNDERFLOW = "Number underflow. Attempting to store a number with magnitude smaller than supported range"
DIGITS = "Attempting to store more than 38 significant digits in a Number"
MAX = "9." + "9" * 37 + "E+125"  # the largest magnitude DynamoDB documents, 38 digits


@pytest.fixture
def db() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        pk_sk_table(client)
        yield client


def key(pk: str = "a", sk: str = "1") -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def refused(call: Any, code: str = "ValidationException", message: str | None = None) -> dict[str, Any]:
    with pytest.raises(ClientError) as caught:
        call()
    error = caught.value.response["Error"]
    assert error["Code"] == code
    if message is not None:
        assert error["Message"] == message
    return caught.value.response  # type: ignore[no-any-return]


def stored(db: Any, attribute: str = "n", k: dict[str, Any] | None = None) -> Any:
    return db.get_item(TableName="t", Key=k or key())["Item"].get(attribute)


@pytest.mark.parametrize(
    ("accepted", "refused_number", "message"),
    [
        ("1" * 38, "1" * 39, DIGITS),
        ("-1.2345678901234567890123456789012345678", "-1.23456789012345678901234567890123456789", DIGITS),
        # trailing and leading zeros are not significant
        ("0001.0000000000000000000000000000000000000000", "1.00000000000000000000000000000000000001", DIGITS),
        (MAX, "1E+126", OVERFLOW),
        ("-" + MAX, "-1E+126", OVERFLOW),
        ("1E-130", "9.9E-131", UNDERFLOW),
        ("-1E-130", "-1E-131", UNDERFLOW),
        ("0E+999", "1E+999", OVERFLOW),
    ],
)
def test_given_a_number_at_the_edge_of_dynamodbs_domain_when_written_anywhere_then_only_the_one_inside_is_stored(
    db: Any, accepted: str, refused_number: str, message: str
) -> None:
    shapes = [
        lambda n: {"N": n},
        lambda n: {"M": {"x": {"L": [{"N": n}]}}},
        lambda n: {"NS": ["1", n]},
    ]
    for shape in shapes:
        db.put_item(TableName="t", Item={**key(), "n": shape(accepted)})
        assert stored(db).keys() == shape(accepted).keys()
        bad = shape(refused_number)
        for call in (
            partial(db.put_item, TableName="t", Item={**key(), "n": bad}),
            partial(
                db.update_item,
                TableName="t",
                Key=key(),
                UpdateExpression="SET n = :v",
                ExpressionAttributeValues={":v": bad},
            ),
            partial(db.batch_write_item, RequestItems={"t": [{"PutRequest": {"Item": {**key("b"), "n": bad}}}]}),
            partial(
                db.transact_write_items, TransactItems=[{"Put": {"TableName": "t", "Item": {**key("c"), "n": bad}}}]
            ),
        ):
            refused(call, message=message)
    assert "Item" not in db.get_item(TableName="t", Key=key("b"))
    assert "Item" not in db.get_item(TableName="t", Key=key("c"))


@pytest.mark.parametrize(
    ("start", "step", "result"),
    [
        ("1" * 37, "1", "1" * 36 + "2"),  # 38 digits: exact
        ("1E+37", "1", "1" + "0" * 36 + "1"),  # 38 digits
        (
            "1.0000000000000000000000000000",
            "0.0000000000000000000000000001",
            "1.0000000000000000000000000001",
        ),  # 29 digits
        ("8E+125", "1.9999999999999999999999999999999999999E+125", MAX),
    ],
)
def test_given_an_add_whose_result_has_38_digits_when_updated_then_it_is_stored_exactly(
    db: Any, start: str, step: str, result: str
) -> None:
    from decimal import Decimal

    db.put_item(TableName="t", Item={**key(), "n": {"N": start}})
    db.update_item(TableName="t", Key=key(), UpdateExpression="ADD n :v", ExpressionAttributeValues={":v": {"N": step}})
    assert Decimal(stored(db)["N"]) == Decimal(result)
    db.update_item(
        TableName="t", Key=key(), UpdateExpression="SET n = n - :v", ExpressionAttributeValues={":v": {"N": step}}
    )
    assert Decimal(stored(db)["N"]) == Decimal(start)


@pytest.mark.parametrize(
    ("start", "step", "message"),
    [
        ("1E+38", "1", OVERFLOW),  # 39 digits: DynamoDB refuses rather than rounds
        ("1E+50", "1", OVERFLOW),
        (MAX, "1E+89", OVERFLOW),  # exact past the range's top
        ("9E+125", "9E+125", OVERFLOW),
        ("2E-130", "-1.5E-130", UNDERFLOW),
    ],
)
def test_given_an_add_whose_result_dynamodb_cannot_hold_when_updated_then_refused_and_nothing_changes(
    db: Any, start: str, step: str, message: str
) -> None:
    db.put_item(TableName="t", Item={**key(), "n": {"N": start}})
    for expression in ("ADD n :v", "SET n = n + :v"):
        refused(
            partial(
                db.update_item,
                TableName="t",
                Key=key(),
                UpdateExpression=expression,
                ExpressionAttributeValues={":v": {"N": step}},
            ),
            message=message,
        )
        assert stored(db) == {"N": start}
    # inside a transaction: cancelled, reason ValidationError, nothing applied
    response = refused(
        lambda: db.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": "t", "Item": key("other")}},
                {
                    "Update": {
                        "TableName": "t",
                        "Key": key(),
                        "UpdateExpression": "ADD n :v",
                        "ExpressionAttributeValues": {":v": {"N": step}},
                    }
                },
            ]
        ),
        code="TransactionCanceledException",
    )
    assert [r["Code"] for r in response["CancellationReasons"]] == ["None", "ValidationError"]
    assert response["CancellationReasons"][1]["Message"] == message
    assert stored(db) == {"N": start}
    assert "Item" not in db.get_item(TableName="t", Key=key("other"))


@pytest.mark.parametrize("parameter", ["UpdateExpression", "ConditionExpression"])
def test_given_an_expression_of_4_kb_when_sent_then_accepted_and_one_byte_more_refused(db: Any, parameter: str) -> None:
    base = {"UpdateExpression": "SET n = :v", "ConditionExpression": "attribute_not_exists(zz)"}
    for size, accepted in ((dynamo_limits.EXPRESSION_BYTES, True), (dynamo_limits.EXPRESSION_BYTES + 1, False)):
        expressions = dict(base)
        expressions[parameter] += " " * (size - len(expressions[parameter]))
        call = partial(
            db.update_item, TableName="t", Key=key(), ExpressionAttributeValues={":v": {"N": "1"}}, **expressions
        )
        if accepted:
            call()
        else:
            refused(call)
    query = "pk = :p" + " " * (dynamo_limits.EXPRESSION_BYTES + 1 - len("pk = :p"))
    refused(lambda: db.query(TableName="t", KeyConditionExpression=query, ExpressionAttributeValues={":p": {"S": "a"}}))
    assert db.query(TableName="t", KeyConditionExpression=query[:-1], ExpressionAttributeValues={":p": {"S": "a"}})


def test_given_placeholders_of_255_bytes_when_sent_then_accepted_and_256_refused(db: Any) -> None:
    for length, accepted in ((dynamo_limits.PLACEHOLDER_BYTES, True), (dynamo_limits.PLACEHOLDER_BYTES + 1, False)):
        name, value = "#" + "n" * (length - 1), ":" + "v" * (length - 1)
        call = partial(
            db.update_item,
            TableName="t",
            Key=key(),
            UpdateExpression=f"SET {name} = {value}",
            ExpressionAttributeNames={name: "n"},
            ExpressionAttributeValues={value: {"N": "1"}},
        )
        if accepted:
            call()
        else:
            refused(call)


def test_given_expression_values_of_2_mb_in_all_when_sent_then_accepted_and_more_refused(db: Any) -> None:
    def values(total: int) -> dict[str, Any]:
        parts = {f":v{i}": {"S": "x" * (300 * 1024)} for i in range(6)}
        used = sum(len(k) + 300 * 1024 for k in parts)
        parts[":w"] = {"S": "x" * (total - used - 2)}
        return parts

    for total, accepted in ((dynamo_limits.SUBSTITUTION_BYTES, True), (dynamo_limits.SUBSTITUTION_BYTES + 1, False)):
        vals = values(total)
        condition = " OR ".join(f"n = {name}" for name in vals)
        call = partial(
            db.update_item,
            TableName="t",
            Key=key(),
            UpdateExpression="SET m = :w",
            ConditionExpression=f"attribute_not_exists(n) OR {condition}",
            ExpressionAttributeValues=vals,
        )
        if accepted:
            call()
            assert stored(db, "m") == vals[":w"]
        else:
            refused(
                call, message="Expression attribute names and values have exceeded the maximum allowed size of 2 MB"
            )


def padded(k: dict[str, Any], size: int) -> dict[str, Any]:
    """An item of exactly `size` bytes by DynamoDB's sizing rules."""
    item = {**k, "b": {"S": ""}}
    item["b"] = {"S": "x" * (size - item_size(item))}
    assert item_size(item) == size
    return item


def test_given_an_item_of_400_kb_when_put_then_accepted_and_one_byte_more_refused(db: Any) -> None:
    limit = dynamo_limits.ITEM_BYTES
    db.put_item(TableName="t", Item=padded(key(), limit))  # moto alone cuts at 405,000 bytes
    refused(
        lambda: db.put_item(TableName="t", Item=padded(key("b"), limit + 1)),
        message="Item size has exceeded the maximum allowed size",
    )
    refused(
        lambda: db.batch_write_item(RequestItems={"t": [{"PutRequest": {"Item": padded(key("b"), limit + 1)}}]}),
        message="Item size has exceeded the maximum allowed size",
    )
    assert "Item" not in db.get_item(TableName="t", Key=key("b"))


def test_given_an_update_that_grows_an_item_past_400_kb_when_sent_then_refused_and_the_item_unchanged(db: Any) -> None:
    limit = dynamo_limits.ITEM_BYTES
    db.put_item(TableName="t", Item=padded(key(), limit - 10))
    # "c" (1 byte) + a string of 9 bytes: exactly 400 KB
    db.update_item(
        TableName="t", Key=key(), UpdateExpression="SET c = :v", ExpressionAttributeValues={":v": {"S": "y" * 9}}
    )
    assert item_size(db.get_item(TableName="t", Key=key())["Item"]) == limit
    refused(
        lambda: db.update_item(
            TableName="t", Key=key(), UpdateExpression="SET c = :v", ExpressionAttributeValues={":v": {"S": "y" * 10}}
        ),
        message="Item size to update has exceeded the maximum allowed size",
    )
    assert stored(db, "c") == {"S": "y" * 9}
    response = refused(
        lambda: db.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": "t",
                        "Key": key(),
                        "UpdateExpression": "SET c = :v",
                        "ExpressionAttributeValues": {":v": {"S": "y" * 10}},
                    }
                }
            ]
        ),
        code="TransactionCanceledException",
    )
    assert [r["Code"] for r in response["CancellationReasons"]] == ["ValidationError"]
    assert stored(db, "c") == {"S": "y" * 9}


@pytest.mark.parametrize(
    ("k_at", "k_over", "message"),
    [
        (
            key("p" * dynamo_limits.PARTITION_KEY_BYTES),
            key("p" * (dynamo_limits.PARTITION_KEY_BYTES + 1)),
            "One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of2048 bytes",
        ),
        (
            key("p", "é" * (dynamo_limits.SORT_KEY_BYTES // 2)),  # bytes, not characters
            key("p", "é" * (dynamo_limits.SORT_KEY_BYTES // 2) + "s"),
            "One or more parameter values were invalid: Aggregated size of all range keys has exceeded the size limit of 1024 bytes",
        ),
    ],
)
def test_given_a_key_at_its_size_limit_when_used_then_accepted_and_one_byte_more_refused(
    db: Any, k_at: dict[str, Any], k_over: dict[str, Any], message: str
) -> None:
    update = {"UpdateExpression": "SET n = :v", "ExpressionAttributeValues": {":v": {"N": "1"}}}
    db.put_item(TableName="t", Item=k_at)
    db.update_item(TableName="t", Key=k_at, **update)
    assert db.get_item(TableName="t", Key=k_at)["Item"]["n"] == {"N": "1"}
    for call in (
        lambda: db.put_item(TableName="t", Item=k_over),
        lambda: db.update_item(TableName="t", Key=k_over, **update),
        lambda: db.get_item(TableName="t", Key=k_over),
        lambda: db.delete_item(TableName="t", Key=k_over),
        lambda: db.transact_write_items(TransactItems=[{"Update": {"TableName": "t", "Key": k_over, **update}}]),
        lambda: db.batch_get_item(RequestItems={"t": {"Keys": [k_over]}}),
    ):
        refused(call, message=message)


def test_given_100_actions_when_a_transaction_then_accepted_and_101_refused(db: Any) -> None:
    def puts(n: int, prefix: str) -> list[dict[str, Any]]:
        return [{"Put": {"TableName": "t", "Item": key(prefix, str(i))}} for i in range(n)]

    db.transact_write_items(TransactItems=puts(dynamo_limits.TRANSACTION_ITEMS, "a"))
    refused(lambda: db.transact_write_items(TransactItems=puts(dynamo_limits.TRANSACTION_ITEMS + 1, "b")))
    assert "Item" not in db.get_item(TableName="t", Key=key("b", "0"))
    gets = [{"Get": {"TableName": "t", "Key": key("a", str(i))}} for i in range(dynamo_limits.TRANSACTION_ITEMS + 1)]
    assert len(db.transact_get_items(TransactItems=gets[:-1])["Responses"]) == dynamo_limits.TRANSACTION_ITEMS
    refused(lambda: db.transact_get_items(TransactItems=gets))


def test_given_4_mb_of_items_when_a_transaction_then_accepted_and_one_byte_more_refused(db: Any) -> None:
    limit = dynamo_limits.TRANSACTION_BYTES
    whole = dynamo_limits.ITEM_BYTES
    count = limit // whole  # 10 items of 400 KB, and the rest in an 11th

    def items(total: int, prefix: str) -> list[dict[str, Any]]:
        sizes = [whole] * count + [total - whole * count]
        return [{"Put": {"TableName": "t", "Item": padded(key(prefix, str(i)), size)}} for i, size in enumerate(sizes)]

    db.transact_write_items(TransactItems=items(limit, "a"))
    refused(lambda: db.transact_write_items(TransactItems=items(limit + 1, "b")))
    assert "Item" not in db.get_item(TableName="t", Key=key("b", "0"))


def test_given_two_actions_on_one_item_when_a_transaction_then_refused(db: Any) -> None:
    message = "Transaction request cannot include multiple operations on one item"
    check = {"ConditionCheck": {"TableName": "t", "Key": key(), "ConditionExpression": "attribute_not_exists(pk)"}}
    db.transact_write_items(TransactItems=[{"Put": {"TableName": "t", "Item": key("b")}}, check])
    refused(
        lambda: db.transact_write_items(TransactItems=[{"Put": {"TableName": "t", "Item": key()}}, check]),
        message=message,
    )
    gets = [{"Get": {"TableName": "t", "Key": key()}}, {"Get": {"TableName": "t", "Key": key()}}]
    refused(lambda: db.transact_get_items(TransactItems=gets), message=message)


def test_given_25_requests_when_a_batch_write_then_accepted_and_26_or_a_repeated_key_refused(db: Any) -> None:
    puts = [{"PutRequest": {"Item": key("a", str(i))}} for i in range(dynamo_limits.BATCH_WRITE_REQUESTS + 1)]
    assert db.batch_write_item(RequestItems={"t": puts[:-1]})["UnprocessedItems"] == {}
    refused(lambda: db.batch_write_item(RequestItems={"t": [{"PutRequest": {"Item": key("b")}}, *puts[1:]]}))
    assert "Item" not in db.get_item(TableName="t", Key=key("b"))
    refused(
        lambda: db.batch_write_item(
            RequestItems={"t": [{"PutRequest": {"Item": key("b")}}, {"DeleteRequest": {"Key": key("b")}}]}
        ),
        message="Provided list of item keys contains duplicates",
    )
    # 25 items of 400 KB: 10 MB, under the 16 MB the batch may carry
    big = [{"PutRequest": {"Item": padded(key("c", str(i)), dynamo_limits.ITEM_BYTES)}} for i in range(25)]
    assert db.batch_write_item(RequestItems={"t": big})["UnprocessedItems"] == {}


def test_given_100_keys_when_a_batch_get_then_accepted_101_refused_and_past_16_mb_the_rest_unprocessed(db: Any) -> None:
    keys = [key("a", str(i)) for i in range(dynamo_limits.BATCH_GET_KEYS + 1)]
    assert db.batch_get_item(RequestItems={"t": {"Keys": keys[:-1]}})["Responses"]["t"] == []
    refused(lambda: db.batch_get_item(RequestItems={"t": {"Keys": keys}}))
    whole = 400 * 1000  # moto sizes items its own way; these stay under 400 KB by either rule
    count = dynamo_limits.BATCH_GET_BYTES // whole + 2
    for i in range(count):
        db.put_item(TableName="t", Item=padded(key("big", str(i)), whole))
    answer = db.batch_get_item(RequestItems={"t": {"Keys": [key("big", str(i)) for i in range(count)]}})
    got, left = answer["Responses"]["t"], answer["UnprocessedKeys"]["t"]["Keys"]
    assert len(got) + len(left) == count
    assert sum(item_size(item) for item in got) <= dynamo_limits.BATCH_GET_BYTES
    assert left


def test_given_a_refused_update_or_a_cancelled_transaction_when_the_table_streams_then_nothing_is_streamed(
    db: Any,
) -> None:
    db.delete_table(TableName="t")
    pk_sk_table(db, stream=True)
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    def streamed() -> int:
        # moto's in-process mock serves no DynamoDB Streams API: its stream is read where it is kept
        return len(dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].tables["t"].stream_shard.items)

    db.put_item(TableName="t", Item={**key(), "n": {"N": "9E+125"}})
    assert streamed() == 1
    add = {"UpdateExpression": "ADD n :v", "ExpressionAttributeValues": {":v": {"N": "9E+125"}}}
    refused(partial(db.update_item, TableName="t", Key=key(), **add), message=OVERFLOW)
    refused(
        partial(
            db.transact_write_items,
            TransactItems=[
                {"Put": {"TableName": "t", "Item": key("b")}},
                {"Update": {"TableName": "t", "Key": key(), **add}},
            ],
        ),
        code="TransactionCanceledException",
    )
    assert streamed() == 1
    db.update_item(
        TableName="t", Key=key(), UpdateExpression="ADD n :v", ExpressionAttributeValues={":v": {"N": "-1E+125"}}
    )
    assert streamed() == 2
