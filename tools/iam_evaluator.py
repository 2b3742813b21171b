"""IAM's evaluation of an identity-based policy, and what each AWS call asks IAM to authorise.

`decide(policy, action, resource)` answers as IAM's policy evaluation logic does for one
identity-based policy: an explicit Deny wins, then an explicit Allow, else the request is
implicitly denied. `Action`/`NotAction` match case-insensitively with `*` and `?`; `Resource`/
`NotResource` match case-sensitively, the wildcards staying inside one colon-separated segment
of the ARN except a `*` that ends a segment, which may run across colons ("IAM JSON policy
elements: Resource"). A statement with a `Condition`, or a policy variable in a resource, is
refused rather than guessed at: nothing here knows the request's context keys.

`required(service, operation, params, ...)` lists the (action, resource ARN) pairs IAM checks for
one API call, from AWS's Service Authorization Reference and the services' guides: batch
operations are authorised once per table or queue they name, a transaction per item under the
item's own action, an object's action on `arn:aws:s3:::<bucket>/<key>`, a listing on the bucket,
a queue's action on the queue's ARN (told from its URL or name).

Not deployed: the local stack and the tests use it to refuse what the generated role
(tools/iam_policy.py) does not allow, as AWS would (tools/iam_enforcement.py).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlsplit


class UnsupportedPolicyError(ValueError):
    """The policy uses something this evaluator cannot judge (a condition, a policy variable)."""


class Decision(enum.Enum):
    ALLOWED = "allowed"
    IMPLICIT_DENY = "implicit deny"  # no statement allows it
    EXPLICIT_DENY = "explicit deny"  # a Deny statement matches: no Allow can override it

    @property
    def allowed(self) -> bool:
        return self is Decision.ALLOWED


@dataclass(frozen=True, order=True)
class Request:
    """One authorisation IAM makes for a call: an action on a resource."""

    action: str  # "service:Action", as IAM names it
    resource: str  # an ARN, or "*" for actions that take no resource


def decide(policy: Mapping[str, Any], action: str, resource: str) -> Decision:
    allowed = False
    for statement in _statements(policy):
        if not (_action_matches(statement, action) and _resource_matches(statement, resource)):
            continue
        if statement.get("Effect") == "Deny":
            return Decision.EXPLICIT_DENY
        if statement.get("Effect") == "Allow":
            allowed = True
    return Decision.ALLOWED if allowed else Decision.IMPLICIT_DENY


def first_refused(policy: Mapping[str, Any], requests: Iterable[Request]) -> tuple[Request, Decision] | None:
    """The first request the policy does not allow, with why; None when it allows them all."""
    for request in requests:
        decision = decide(policy, request.action, request.resource)
        if not decision.allowed:
            return request, decision
    return None


def _statements(policy: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    statements = policy.get("Statement", [])
    statements = [statements] if isinstance(statements, Mapping) else list(statements)
    for statement in statements:
        if "Condition" in statement:
            raise UnsupportedPolicyError(f"statement {statement.get('Sid', '')!r} has a Condition: not evaluated here")
        if statement.get("Effect") not in ("Allow", "Deny"):
            raise UnsupportedPolicyError(f"statement {statement.get('Sid', '')!r}: Effect must be Allow or Deny")
    return statements


def _listed(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _action_matches(statement: Mapping[str, Any], action: str) -> bool:
    if "NotAction" in statement:
        return not any(_action_pattern(p).fullmatch(action) for p in _listed(statement["NotAction"]))
    return any(_action_pattern(p).fullmatch(action) for p in _listed(statement.get("Action", [])))


def _resource_matches(statement: Mapping[str, Any], resource: str) -> bool:
    if "NotResource" in statement:
        return not any(_resource_pattern(p).fullmatch(resource) for p in _listed(statement["NotResource"]))
    return any(_resource_pattern(p).fullmatch(resource) for p in _listed(statement.get("Resource", [])))


@cache
def _action_pattern(pattern: str) -> re.Pattern[str]:
    # Action names are case-insensitive ("IAM JSON policy elements: Action").
    text = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(text, re.IGNORECASE | re.DOTALL)


@cache
def _resource_pattern(pattern: str) -> re.Pattern[str]:
    if pattern == "*":
        return re.compile(".*", re.DOTALL)
    if "${" in pattern:
        raise UnsupportedPolicyError(f"resource {pattern!r} holds a policy variable: not evaluated here")
    parts: list[str] = []
    for i, c in enumerate(pattern):
        if c == "*":
            # "If the * wildcard is the last character of a resource ARN segment, it can expand to
            # match beyond the colon boundaries"; elsewhere it stays inside its segment.
            ends_segment = i + 1 == len(pattern) or pattern[i + 1] == ":"
            parts.append(".*" if ends_segment else "[^:]*")
        elif c == "?":
            parts.append("[^:]")
        else:
            parts.append(re.escape(c))
    return re.compile("".join(parts), re.DOTALL)


# -- what a call asks IAM ---------------------------------------------------------------------

# TransactWriteItems: "Permissions for Put, Update, Delete, and Get actions are governed by the
# permissions used for the underlying PutItem, UpdateItem, DeleteItem, and GetItem operations.
# For the ConditionCheck action, you can use the dynamodb:ConditionCheckItem permission"
# ("Using IAM with DynamoDB transactions").
_TRANSACTION_ACTIONS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
    "Get": "dynamodb:GetItem",
}
# SQS's batch operations have no IAM action of their own: each is its single-message action.
_SQS_ACTIONS = {
    "SendMessageBatch": "sqs:SendMessage",
    "DeleteMessageBatch": "sqs:DeleteMessage",
    "ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
}
# S3 operations whose IAM action is not named after them; every other one is s3:<Operation>.
_S3_ACTIONS = {
    "HeadObject": "s3:GetObject",
    "GetObjectAttributes": "s3:GetObject",
    "ListObjects": "s3:ListBucket",
    "ListObjectsV2": "s3:ListBucket",
    "HeadBucket": "s3:ListBucket",
    "ListObjectVersions": "s3:ListBucketVersions",
    "DeleteObjects": "s3:DeleteObject",
}


def required(service: str, operation: str, params: Mapping[str, Any], *, region: str, account: str) -> list[Request]:
    """What IAM checks for `operation` of `service` (botocore's names) called with `params`."""
    if service == "dynamodb":
        return _dynamodb(operation, params, region, account)
    if service == "sqs":
        return _sqs(operation, params, region, account)
    if service == "s3":
        return _s3(operation, params)
    if service == "secretsmanager" and "SecretId" in params:
        return [Request(f"secretsmanager:{operation}", secret_arn(params["SecretId"], region, account))]
    return [Request(f"{service}:{operation}", "*")]


def secret_arn(secret_id: str, region: str, account: str) -> str:
    """SecretId takes a name or an ARN; IAM judges the full ARN, which ends in `-` and six random
    characters (stood in for here by `XXXXXX`, which the policy's `-??????` matches as it would them)."""
    return (
        secret_id
        if secret_id.startswith("arn:")
        else f"arn:aws:secretsmanager:{region}:{account}:secret:{secret_id}-XXXXXX"
    )


def table_arn(table: str, region: str, account: str) -> str:
    # TableName also takes the table's ARN.
    return table if table.startswith("arn:") else f"arn:aws:dynamodb:{region}:{account}:table/{table}"


def _dynamodb(operation: str, params: Mapping[str, Any], region: str, account: str) -> list[Request]:
    if operation in ("BatchGetItem", "BatchWriteItem"):
        return [Request(f"dynamodb:{operation}", table_arn(t, region, account)) for t in params.get("RequestItems", {})]
    if operation in ("TransactWriteItems", "TransactGetItems"):
        found: list[Request] = []
        for item in params.get("TransactItems", []):
            for kind, body in item.items():
                found.append(Request(_TRANSACTION_ACTIONS[kind], table_arn(body["TableName"], region, account)))
        return found
    if "TableName" not in params:
        return [Request(f"dynamodb:{operation}", "*")]
    arn = table_arn(params["TableName"], region, account)
    if operation in ("Query", "Scan") and params.get("IndexName"):
        arn = f"{arn}/index/{params['IndexName']}"
    return [Request(f"dynamodb:{operation}", arn)]


def queue_arn(url: str, region: str) -> str:
    """`https://sqs.<region>.amazonaws.com/<account>/<name>` (or an emulator's) -> the queue's ARN."""
    account, name = urlsplit(url).path.strip("/").split("/")[-2:]
    return f"arn:aws:sqs:{region}:{account}:{name}"


def _sqs(operation: str, params: Mapping[str, Any], region: str, account: str) -> list[Request]:
    action = _SQS_ACTIONS.get(operation, f"sqs:{operation}")
    if "QueueUrl" in params:
        return [Request(action, queue_arn(params["QueueUrl"], region))]
    if "QueueName" in params:  # GetQueueUrl, CreateQueue
        owner = params.get("QueueOwnerAWSAccountId") or account
        return [Request(action, f"arn:aws:sqs:{region}:{owner}:{params['QueueName']}")]
    return [Request(action, "*")]


def _s3(operation: str, params: Mapping[str, Any]) -> list[Request]:
    action = _S3_ACTIONS.get(operation, f"s3:{operation}")
    bucket = params.get("Bucket")
    if bucket is None:
        return [Request(action, "*")]
    if operation == "DeleteObjects":
        keys = [o["Key"] for o in params.get("Delete", {}).get("Objects", [])]
        return [Request(action, f"arn:aws:s3:::{bucket}/{key}") for key in keys]
    if operation == "CopyObject":
        source = params["CopySource"]
        source = source if isinstance(source, str) else f"{source['Bucket']}/{source['Key']}"
        return [
            Request("s3:GetObject", f"arn:aws:s3:::{source.lstrip('/').split('?')[0]}"),
            Request("s3:PutObject", f"arn:aws:s3:::{bucket}/{params['Key']}"),
        ]
    if "Key" in params:
        return [Request(action, f"arn:aws:s3:::{bucket}/{params['Key']}")]
    return [Request(action, f"arn:aws:s3:::{bucket}")]
