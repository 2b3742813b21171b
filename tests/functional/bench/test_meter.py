"""The benchmarks' meter charges what DynamoDB charges, against moto."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from bench.metering import Meter

TABLE = "metered"


@pytest.fixture
def dynamodb(aws: Any) -> Any:
    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return client


def test_given_a_2_5_kb_item_when_a_conditional_put_on_it_fails_then_its_size_is_charged(dynamodb: Any) -> None:
    reader = boto3.client("dynamodb", region_name="us-east-1")
    meter = Meter(reader)
    metered = meter.attach(boto3.client("dynamodb", region_name="us-east-1"))
    metered.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "v": {"S": "x" * 2500}})

    with pytest.raises(metered.exceptions.ConditionalCheckFailedException):
        metered.put_item(TableName=TABLE, Item={"pk": {"S": "a"}}, ConditionExpression="attribute_not_exists(pk)")

    usage = meter.total("PutItem")
    assert (usage.requests, usage.items_written, usage.failed_conditions) == (2, 1, 1)
    assert usage.write_units == 3 + 3  # the write, then the failed one by the existing item's size


def test_given_no_item_when_a_conditional_update_fails_then_one_unit_is_charged(dynamodb: Any) -> None:
    meter = Meter(boto3.client("dynamodb", region_name="us-east-1"))
    metered = meter.attach(boto3.client("dynamodb", region_name="us-east-1"))

    with pytest.raises(metered.exceptions.ConditionalCheckFailedException):
        metered.update_item(
            TableName=TABLE,
            Key={"pk": {"S": "b"}},
            UpdateExpression="SET v = :v",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":v": {"N": "1"}},
        )

    usage = meter.total("UpdateItem")
    assert (usage.write_units, usage.failed_conditions, usage.items_written) == (1, 1, 0)
