"""Which AWS operations chalicelib calls, and the IAM actions each one needs.

The scan reads the source (no import): every `<receiver>.<operation>(...)` whose operation
belongs to a service Tally uses, the service told by the receiver's name (`dynamodb`,
`aws.sqs`, `self._s3`, ...), plus `get_paginator("<operation>")`. An operation with no entry
in IAM_ACTIONS is an error, so a new call cannot ship without a decision on its permissions.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import botocore.session
from botocore import xform_name

SERVICES = ("dynamodb", "sqs", "s3", "secretsmanager")

# Per AWS's Service Authorization Reference. Transactions and batches are authorised per
# item action; TransactWriteItems has no IAM action of its own. Scan is left out on purpose:
# Tally never re-reads a whole table (DESIGN.md), so a Scan fails this map instead.
IAM_ACTIONS: dict[tuple[str, str], tuple[str, ...]] = {
    ("dynamodb", "query"): ("dynamodb:Query",),
    ("dynamodb", "get_item"): ("dynamodb:GetItem",),
    ("dynamodb", "put_item"): ("dynamodb:PutItem",),
    ("dynamodb", "update_item"): ("dynamodb:UpdateItem",),
    ("dynamodb", "delete_item"): ("dynamodb:DeleteItem",),
    ("dynamodb", "batch_get_item"): ("dynamodb:BatchGetItem",),
    ("dynamodb", "batch_write_item"): ("dynamodb:BatchWriteItem",),
    ("dynamodb", "transact_write_items"): ("dynamodb:ConditionCheckItem", "dynamodb:PutItem", "dynamodb:UpdateItem"),
    ("dynamodb", "transact_get_items"): ("dynamodb:GetItem",),
    ("sqs", "send_message"): ("sqs:SendMessage",),
    ("sqs", "send_message_batch"): ("sqs:SendMessage",),
    ("sqs", "receive_message"): ("sqs:ReceiveMessage",),
    ("sqs", "delete_message"): ("sqs:DeleteMessage",),
    ("sqs", "delete_message_batch"): ("sqs:DeleteMessage",),
    ("sqs", "change_message_visibility"): ("sqs:ChangeMessageVisibility",),
    ("sqs", "change_message_visibility_batch"): ("sqs:ChangeMessageVisibility",),
    ("sqs", "get_queue_url"): ("sqs:GetQueueUrl",),
    ("sqs", "get_queue_attributes"): ("sqs:GetQueueAttributes",),
    ("s3", "put_object"): ("s3:PutObject",),
    ("s3", "get_object"): ("s3:GetObject",),
    ("s3", "head_object"): ("s3:GetObject",),
    ("s3", "delete_object"): ("s3:DeleteObject",),
    ("s3", "list_objects_v2"): ("s3:ListBucket",),
    ("secretsmanager", "get_secret_value"): ("secretsmanager:GetSecretValue",),
}


class UnknownOperationError(ValueError):
    """The code calls an operation whose IAM actions nobody has decided yet."""


@dataclass(frozen=True, order=True)
class Call:
    service: str
    operation: str
    where: str  # path:line, for the error messages

    @property
    def key(self) -> tuple[str, str]:
        return (self.service, self.operation)


@cache
def operation_names(service: str) -> frozenset[str]:
    model = botocore.session.get_session().get_service_model(service)
    return frozenset(xform_name(name) for name in model.operation_names)


def scan(package: Path) -> list[Call]:
    """Every client operation called in the .py files under package, in a stable order."""
    calls: list[Call] = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            found = _client_call(node)
            if found is not None:
                calls.append(Call(found[0], found[1], f"{path.name}:{node.lineno}"))
    return sorted(calls)


def _client_call(node: ast.AST) -> tuple[str, str] | None:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    operation = node.func.attr
    if operation == "get_paginator" and node.args and isinstance(node.args[0], ast.Constant):
        operation = str(node.args[0].value)
    owners = [service for service in SERVICES if operation in operation_names(service)]
    if not owners:
        return None
    service = _service_of(node.func.value)
    if service is None:
        if len(owners) > 1:
            raise UnknownOperationError(
                f"line {node.lineno}: `.{operation}(` could be {owners}; name the client after its service"
            )
        service = owners[0]
    return (service, operation) if operation in operation_names(service) else None


def _service_of(receiver: ast.AST) -> str | None:
    """`dynamodb`, `aws.dynamodb`, `self._sqs` -> the service; anything else -> None."""
    while True:
        name = receiver.attr if isinstance(receiver, ast.Attribute) else getattr(receiver, "id", None)
        if name is not None and name.strip("_") in SERVICES:
            return name.strip("_")
        if isinstance(receiver, ast.Attribute):
            receiver = receiver.value
            continue
        return None


def actions_for(calls: list[Call]) -> dict[str, set[str]]:
    """IAM actions per service for these calls; raises on an operation with no mapping."""
    unknown = sorted({f"{c.service}.{c.operation} ({c.where})" for c in calls if c.key not in IAM_ACTIONS})
    if unknown:
        raise UnknownOperationError(
            "no IAM actions known for: " + ", ".join(unknown) + "; add them to tools/aws_operations.IAM_ACTIONS"
        )
    actions: dict[str, set[str]] = {}
    for call in calls:
        actions.setdefault(call.service, set()).update(IAM_ACTIONS[call.key])
    return actions
