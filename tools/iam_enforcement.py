"""The generated role policy, enforced on the app's AWS clients where the emulator enforces none.

moto checks no IAM policy (it can, for users' own policies, but not for a Lambda function's
role), and Chalice's local server runs handlers with whatever credentials the process has. So
the local stack and the tests hook the app's clients (`guard`): before botocore sends a call,
tools/iam_evaluator.py lists what IAM would authorise for it and judges that against the role's
policy (tools/iam_policy.py, for the settings in use); a call the policy does not allow is
answered, without reaching the emulator, with the error the service gives:

- DynamoDB: `AccessDeniedException` (HTTP 400);
- SQS: `AccessDenied` (HTTP 403), the code botocore surfaces for SQS's query-compatible errors;
- S3: `AccessDenied` (HTTP 403); and, as S3 does for a caller without s3:ListBucket on the
  bucket, a GetObject/HeadObject of a missing key answers 403 instead of 404.

botocore raises them as it raises the service's own answers (ClientError, no retries), so the
app's storage code meets exactly what it would meet on AWS. Chalicelib knows nothing of this:
the hooks are botocore event handlers registered on the clients from outside.

`applies` chooses which calls are judged. The local stack judges every call of the app's
clients (only the app uses them). The tests' `aws` fixture shares its clients between the app
and the test's own setup and inspection: there `deployed_code_calls` judges a call when code that
ships in the Lambda package (app.py, chalicelib/) is on the call stack, which is every call the
deployed functions would make, whether a route, a handler invoked as Lambda would, or a test
calling a chalicelib function directly; what a test does itself to arrange or inspect the
emulator stays unrestricted, and so does a test helper marked `outside_the_app`, which plays
AWS's part even when app code reaches it through a fake a test injected.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import CodeType
from typing import Any, TypeVar

from botocore.awsrequest import AWSResponse

from tools.iam_evaluator import Decision, Request, decide, first_refused, required

PROJECT = Path(__file__).resolve().parent.parent
_DEPLOYED_FILES = (str(PROJECT / "app.py"),)
_DEPLOYED_DIRS = (str(PROJECT / "chalicelib") + "/",)

_REFUSAL = "tally.iam_refusal"  # where a call's refusal waits, in botocore's per-call context
_BUCKET = "tally.iam_bucket"
# How each service answers a request IAM refused: (error code, HTTP status).
ACCESS_DENIED = {
    "dynamodb": ("AccessDeniedException", 400),
    "sqs": ("AccessDenied", 403),
    "s3": ("AccessDenied", 403),
}


class Role:
    """A Lambda function's execution role: its policy, in an account. `policy` may be replaced
    (a test narrowing it); every call reads the current one."""

    def __init__(self, policy: Mapping[str, Any], *, account: str, name: str = "tally") -> None:
        self.policy = policy
        self.account = account
        self.principal = f"arn:aws:sts::{account}:assumed-role/{name}/{name}"

    def refusal(self, requests: list[Request]) -> tuple[Request, Decision] | None:
        return first_refused(self.policy, requests)

    def allows(self, action: str, resource: str) -> bool:
        return decide(self.policy, action, resource).allowed

    def message(self, request: Request, decision: Decision) -> str:
        why = (
            "with an explicit deny in an identity-based policy"
            if decision is Decision.EXPLICIT_DENY
            else f"because no identity-based policy allows the {request.action} action"
        )
        return (
            f"User: {self.principal} is not authorized to perform: {request.action} "
            f"on resource: {request.resource} {why}"
        )

    def require(self, actions: tuple[str, ...], resource: str, what: str) -> None:
        """Refuse to set up `what` (an event source mapping) unless every action is allowed on
        `resource`: Lambda checks the role when a mapping is created and polls with it."""
        missing = [a for a in actions if not self.allows(a, resource)]
        if missing:
            raise PermissionError(f"{what}: the role does not allow {', '.join(missing)} on {resource}")


def always() -> bool:
    return True


_OUTSIDE_THE_APP: set[CodeType] = set()
F = TypeVar("F", bound=Callable[..., Any])


def outside_the_app(function: F) -> F:
    """Mark a test helper that plays AWS's part or an operator's (reading what a stream would
    deliver, say): its calls are not the app's, even when app code reached it through a fake a
    test injected."""
    _OUTSIDE_THE_APP.add(function.__code__)
    return function


def deployed_code_calls() -> bool:
    """Whether code the Lambda package ships (app.py, chalicelib/) is making the current call:
    the nearest such frame up the stack comes before any helper marked `outside_the_app`."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code in _OUTSIDE_THE_APP:
            return False
        if code.co_filename in _DEPLOYED_FILES or code.co_filename.startswith(_DEPLOYED_DIRS):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def guard(clients: Any, role: Role, applies: Callable[[], bool] = always) -> None:
    """Judge the calls of `clients` (chalicelib.core.aws.AwsClients: its DynamoDB, SQS, S3 and Secrets Manager
    clients, created here if not yet) against `role`."""
    for client in (clients.dynamodb, clients.sqs, clients.s3, clients.secretsmanager):
        attach(client, role, applies)


def attach(client: Any, role: Role, applies: Callable[[], bool] = always) -> None:
    service = client.meta.service_model.service_name
    service_id = client.meta.service_model.service_id.hyphenize()
    region = client.meta.region_name
    code, status = ACCESS_DENIED.get(service, ("AccessDenied", 403))

    def judge(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if not applies():
            return
        requests = required(service, model.name, params, region=region, account=role.account)
        refused = role.refusal(requests)
        if refused is not None:
            context[_REFUSAL] = role.message(*refused)
        elif service == "s3" and model.name in ("GetObject", "HeadObject"):
            context[_BUCKET] = params.get("Bucket")

    def answer(context: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        message = context.get(_REFUSAL)
        return None if message is None else _error(code, status, message)

    def missing_object(
        http_response: Any, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any
    ) -> None:
        # "If you don't have the s3:ListBucket permission, Amazon S3 returns an HTTP status code
        # 403 Access Denied error" for a key that does not exist (GetObject, HeadObject).
        bucket = context.get(_BUCKET)
        if bucket is None or http_response.status_code != 404 or role.allows("s3:ListBucket", f"arn:aws:s3:::{bucket}"):
            return
        http_response.status_code = 403
        # HeadObject's answer has no body: botocore names its error after the status.
        parsed["Error"] = {"Code": "403" if model.name == "HeadObject" else "AccessDenied", "Message": "Access Denied"}
        parsed.setdefault("ResponseMetadata", {})["HTTPStatusCode"] = 403

    # before-parameter-build sees the call's own parameters (before-call sees them serialised);
    # the refusal is answered at before-call, after botocore validated them as it always does.
    client.meta.events.register(f"before-parameter-build.{service_id}", judge)
    client.meta.events.register(f"before-call.{service_id}", answer)
    if service == "s3":
        client.meta.events.register(f"after-call.{service_id}", missing_object)


def _error(code: str, status: int, message: str) -> tuple[AWSResponse, dict[str, Any]]:
    response = AWSResponse(url="", status_code=status, headers={}, raw=None)
    parsed = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}, "RetryAttempts": 0},
    }
    return response, parsed
