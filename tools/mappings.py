"""The settings pinned on the events stream's event source mapping, defined once.

Chalice creates the mapping (`@app.on_dynamodb_record`) with its batch size and starting
position only; everything else would stay at Lambda's defaults, which the counting proof
cannot live with (docs/guarantees.md quotes what each default means):

- ParallelizationFactor 1: Lambda processes one batch at a time from each shard, in order;
- TumblingWindowInSeconds: Lambda then puts the shard's id (`shardId`) in every event, which
  the stream handler keys its applied positions by (and the handler must answer `state`);
- MaximumRetryAttempts and MaximumRecordAgeInSeconds: a failing batch is retried a bounded
  number of times, for a bounded time, instead of blocking its shard until its records
  leave the stream (24 hours);
- BisectBatchOnFunctionError: a failing batch is split in two and retried, so a fault tied
  to some records does not hold back the others;
- DestinationConfig.OnFailure: a batch Lambda gives up on is described (shard, sequence
  numbers) in the stage's stream-failures queue, which an alarm watches
  (tools/monitoring.py); its events are still in the events table for a recount.

FunctionResponseTypes stays empty: the stream handler fails or succeeds whole batches (it
sets bad records aside itself and returns no `batchItemFailures`). The SQS mappings keep
Chalice's settings for the same reason (chalicelib/core/queues.py deletes what it handled).

`make package` writes these into the template (tools/cfn_template.py), `make deploy` sets them
after `chalice deploy` and reads them back (tools/provision.py), and the local stack can read
them from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The stream-failures queue's logical id in the packaged template.
FAILURES_QUEUE_ID = "EventsStreamFailures"
PARALLELIZATION_FACTOR = 1
# Short, so a window's state stays small; the handler returns its state every batch anyway.
TUMBLING_WINDOW_SECONDS = 60
# Bisection splits do not count towards the retries (Lambda developer guide).
MAXIMUM_RETRY_ATTEMPTS = 50
# Well inside the stream's 24-hour retention, so a batch given up on can still be read from
# the stream for hours after its on-failure message, and from the events table for days.
MAXIMUM_RECORD_AGE_SECONDS = 6 * 3600
# Lambda's own bounds for these parameters (UpdateEventSourceMapping).
RETRY_ATTEMPTS_RANGE = (0, 10_000)
RECORD_AGE_RANGE = (60, 604_800)
TUMBLING_WINDOW_RANGE = (0, 900)


def stream_settings(on_failure_destination: Any) -> dict[str, Any]:
    """The pinned settings, in UpdateEventSourceMapping's (and the CloudFormation
    EventSourceMapping's) names. `on_failure_destination` is the queue's ARN, or an
    intrinsic function in a template."""
    return {
        "ParallelizationFactor": PARALLELIZATION_FACTOR,
        "TumblingWindowInSeconds": TUMBLING_WINDOW_SECONDS,
        "MaximumRetryAttempts": MAXIMUM_RETRY_ATTEMPTS,
        "MaximumRecordAgeInSeconds": MAXIMUM_RECORD_AGE_SECONDS,
        "BisectBatchOnFunctionError": True,
        "FunctionResponseTypes": [],
        "DestinationConfig": {"OnFailure": {"Destination": on_failure_destination}},
    }


def differences(wanted: Mapping[str, Any], actual: Mapping[str, Any], path: str = "") -> list[str]:
    """What a mapping read back (GetEventSourceMapping) holds that differs from `wanted`, one
    line per setting. Only the settings pinned are compared; an empty list pinned matches a
    list left out, which is how Lambda answers for FunctionResponseTypes never set."""
    found = []
    for key, value in wanted.items():
        name = f"{path}{key}"
        have = actual.get(key)
        if isinstance(value, Mapping):
            found += differences(value, have if isinstance(have, Mapping) else {}, f"{name}.")
        elif value == [] and have in (None, []):
            continue
        elif have != value:
            found.append(f"{name} is {have!r}, pinned {value!r}")
    return found
