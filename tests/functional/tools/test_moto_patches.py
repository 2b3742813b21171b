"""The emulator patch keeps moto's all-or-nothing transactions (tested with moto, no network)."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from tests.functional.helpers import pk_sk_table


def test_given_cancelled_transaction_when_patched_moto_then_nothing_applied() -> None:
    with mock_aws():
        db = boto3.client("dynamodb", region_name="us-east-1")
        pk_sk_table(db)
        db.put_item(TableName="t", Item={"pk": {"S": "a"}, "sk": {"S": "1"}, "n": {"N": "5"}})
        db.put_item(TableName="t", Item={"pk": {"S": "c"}, "sk": {"S": "1"}})
        items = [
            {
                "Update": {
                    "TableName": "t",
                    "Key": {"pk": {"S": "a"}, "sk": {"S": "1"}},
                    "UpdateExpression": "ADD n :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                }
            },
            {"Put": {"TableName": "t", "Item": {"pk": {"S": "b"}, "sk": {"S": "1"}}}},
            {
                "Put": {
                    "TableName": "t",
                    "Item": {"pk": {"S": "c"}, "sk": {"S": "1"}},
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        ]
        with pytest.raises(ClientError) as caught:
            db.transact_write_items(TransactItems=items)
        assert [r["Code"] for r in caught.value.response["CancellationReasons"]] == [
            "None",
            "None",
            "ConditionalCheckFailed",
        ]
        assert db.get_item(TableName="t", Key={"pk": {"S": "a"}, "sk": {"S": "1"}})["Item"]["n"]["N"] == "5"
        assert "Item" not in db.get_item(TableName="t", Key={"pk": {"S": "b"}, "sk": {"S": "1"}})
        db.transact_write_items(TransactItems=items[:2])
        assert db.get_item(TableName="t", Key={"pk": {"S": "a"}, "sk": {"S": "1"}})["Item"]["n"]["N"] == "6"
