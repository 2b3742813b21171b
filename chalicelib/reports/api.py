"""Reports, the routes side: list committed reports and read one (JSON or CSV). docs/api.md."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from chalicelib.core import attributes, pager, times
from chalicelib.core.aws import S3, DynamoDB
from chalicelib.core.errors import NotFoundError, ValidationError
from chalicelib.core.settings import Settings
from chalicelib.core.storage_errors import translated
from chalicelib.reports import ranges as report_ranges
from chalicelib.reports.runs import INDEX_PK, _index_item, _object_keys

FORMATS = ("json", "csv")


def list_reports(dynamodb: DynamoDB, settings: Settings, params: Mapping[str, str]) -> dict[str, Any]:
    """One page (core.pager) of the committed reports, newest first."""
    request = pager.page_request(params, report_ranges.parse_report_id)
    page = pager.query_page(
        dynamodb, settings.counts_table, INDEX_PK, request, "the reports could not be listed", newest_first=True
    )
    reports = [
        {
            "id": attributes.sort_key(item),
            "start": times.iso(attributes.integer(item, "start_ms")),
            "end": times.iso(attributes.integer(item, "end_ms")),
            "events": attributes.integer(item, "events"),
        }
        for item in page.items
    ]
    return {"reports": reports, "next": page.next}


def get_report(dynamodb: DynamoDB, s3: S3, settings: Settings, report_id: str) -> dict[str, Any]:
    return dict(json.loads(_read_object(dynamodb, s3, settings, report_id, "json")))


def get_report_csv(dynamodb: DynamoDB, s3: S3, settings: Settings, report_id: str) -> str:
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


def _read_object(dynamodb: DynamoDB, s3: S3, settings: Settings, report_id: str, kind: str) -> bytes:
    report_ranges.parse_report_id(report_id)
    if _index_item(dynamodb, settings, report_id) is None:
        raise NotFoundError(f"no report {report_id}")
    with translated(f"report {report_id} could not be read from S3"):
        body: bytes = s3.get_object(Bucket=settings.reports_bucket, Key=_object_keys(report_id)[kind])["Body"].read()
    return body
