"""Goals: what the beacon counts for them (their converting visitors, `goal:<site>:<id>`) and
what the site summary answers for them (conversions read from the site's counters). How, and why
that is exact under redelivery: docs/tracker.md, "Goals"."""

from __future__ import annotations

from typing import Any

from chalicelib.core.aws import SQS, DynamoDB
from chalicelib.core.settings import Settings
from chalicelib.counters import reads
from chalicelib.sites import names
from chalicelib.sites.settings import Goal, SiteSettings
from chalicelib.uniques import api as uniques_api


def enqueue_visitor(
    sqs: SQS, settings: Settings, item_key: bytes, site: str, goals: list[Goal], visitor: str, time_ms: int
) -> None:
    """The visitor into each matched goal's unique count (the same item as the site's visitors)."""
    for goal in goals:
        name = names.goal_visitors_name(site, goal.id)
        uniques_api.enqueue(sqs, settings, item_key, name, uniques_api.Post([visitor], time_ms))


def in_summary(
    dynamodb: DynamoDB,
    settings: Settings,
    site_settings: SiteSettings,
    minutes: tuple[int, int],
    span: tuple[int, int],
    site_visitors: int,
    now_ms: int,
) -> tuple[list[dict[str, Any]], int]:
    """Each goal's `conversions`, `visitors` and `conversion_rate` over the summary's window (its
    visitors over the same minutes [start, stop) as the site's: uniques.api.window_cardinality),
    and the keys read."""
    site, answers, keys_read = site_settings.site, [], 0
    for goal in site_settings.goals:
        if goal.event is not None:
            counter, where = names.event_counter(site, goal.event), None
        else:
            counter, where = names.pageview_counter(site), {"page": goal.page or ""}
        found = reads.count_window(dynamodb, settings, counter, *minutes, now_ms, where=where)
        converted = uniques_api.window_cardinality(
            dynamodb, settings, [names.goal_visitors_name(site, goal.id)], span, now_ms
        )
        visitors = int(converted["cardinality"])
        answers.append(
            {
                **goal.as_dict(),
                "conversions": found.count,
                "visitors": visitors,
                "visitors_exact": converted["exact"],
                "conversion_rate": round(visitors / site_visitors, 4) if site_visitors else 0.0,
            }
        )
        keys_read += found.keys_read + int(converted["keys_read"])
    return answers, keys_read
