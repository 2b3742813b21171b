"""Reports, the routes side: list committed reports and read one."""

from __future__ import annotations

import json
import logging
from typing import Any

from botocore.exceptions import ClientError

from chalicelib.core import catalog, validation
from chalicelib.core.errors import NotFoundError, StorageError, ValidationError
from chalicelib.core.settings import Settings
from chalicelib.reports import ranges as report_ranges
from chalicelib.reports.runs import INDEX_PK, _index_item, _object_keys

log = logging.getLogger(__name__)

MAX_LIST = 1000
FORMATS = ("json", "csv")


def list_reports(dynamodb: Any, settings: Settings, raw_limit: str | None = None) -> list[dict[str, Any]]:
    """The newest `limit` reports (default 100), newest first."""
    limit = catalog.page_limit(raw_limit, most=MAX_LIST)
    try:
        page = dynamodb.query(
            TableName=settings.counts_table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": INDEX_PK}},
            ScanIndexForward=False,
            Limit=limit,
        )
    except ClientError as exc:
        raise StorageError("the reports could not be listed") from exc
    return [
        {
            "id": item["sk"]["S"],
            "start": validation.iso(int(item["start_ms"]["N"])),
            "end": validation.iso(int(item["end_ms"]["N"])),
            "events": int(item["events"]["N"]),
        }
        for item in page.get("Items", [])
    ]


def get_report(dynamodb: Any, s3: Any, settings: Settings, report_id: str) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(_read_object(dynamodb, s3, settings, report_id, "json"))
    return report


def get_report_csv(dynamodb: Any, s3: Any, settings: Settings, report_id: str) -> str:
    """The report's CSV, as stored beside its JSON: `counter,events,<attribute>...`."""
    return _read_object(dynamodb, s3, settings, report_id, "csv").decode("utf-8")


def download_format(report_id: str, params: dict[str, str]) -> tuple[str, str]:
    """(report id, "json" or "csv") for `/reports/{id}`, `/reports/{id}.csv` or `?format=csv`."""
    fmt = params.get("format")
    if fmt is not None and fmt not in FORMATS:
        raise ValidationError(f"format must be one of {', '.join(FORMATS)}")
    for suffix in FORMATS:
        if report_id.endswith(f".{suffix}"):
            if fmt is not None and fmt != suffix:
                raise ValidationError(f"the path asks for {suffix} and format for {fmt}")
            return report_id.removesuffix(f".{suffix}"), suffix
    return report_id, fmt or "json"


def _read_object(dynamodb: Any, s3: Any, settings: Settings, report_id: str, kind: str) -> bytes:
    report_ranges.parse_report_id(report_id)
    if _index_item(dynamodb, settings, report_id) is None:
        raise NotFoundError(f"no report {report_id}")
    try:
        body: bytes = s3.get_object(Bucket=settings.reports_bucket, Key=_object_keys(report_id)[kind])["Body"].read()
    except ClientError as exc:
        raise StorageError(f"report {report_id} could not be read from S3") from exc
    return body
