"""A schedule's checkpoint: one item holding where the schedule's runs have got to, moved only from
where a run read it, in the transaction that writes what the run found. Why each range then has one
run: docs/design.md, "Reports" ("Exactly one report per event")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chalicelib.core import attributes, dynamo
from chalicelib.core.aws import DynamoDB


@dataclass(frozen=True)
class Checkpoint:
    schedule: str  # what runs, in messages: "audit", "report"
    prefix: str  # the schedule's key prefix (core.keyspace)
    name: str  # the attribute holding the position, epoch ms

    @property
    def key(self) -> dict[str, Any]:
        return {"pk": {"S": f"{self.prefix}checkpoint"}, "sk": {"S": "#"}}

    def read(self, dynamodb: DynamoDB, table: str) -> int | None:
        """Where the schedule has got to; None before its first run."""
        item = dynamo.get_item(dynamodb, table, self.key, f"the {self.schedule} checkpoint could not be read")
        return None if item is None else attributes.integer(item, self.name)

    def move(self, table: str, read_ms: int | None, to_ms: int, **more: Any) -> dict[str, Any]:
        """A transaction's Update moving the checkpoint to `to_ms` (and setting `more`'s attribute
        values), on condition that it is still at `read_ms` (None: that it does not exist yet)."""
        values = {":to": {"N": str(to_ms)}, **{f":{k}": v for k, v in more.items()}}
        if read_ms is not None:
            values[":read"] = {"N": str(read_ms)}
        return {
            "Update": {
                "TableName": table,
                "Key": self.key,
                "UpdateExpression": "SET " + ", ".join([f"{self.name} = :to", *(f"{k} = :{k}" for k in more)]),
                "ConditionExpression": "attribute_not_exists(pk)" if read_ms is None else f"{self.name} = :read",
                "ExpressionAttributeValues": values,
            }
        }
