"""What a site's owner reads, `GET /sites`, `GET /sites/{site}/summary` and `GET /sites/{site}/realtime`: what each
answers, reads and costs is in docs/tracker.md, "What you see", "Goals" and "Right now"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.core import catalog, pager, times, window_params
from chalicelib.core.aws import DynamoDB
from chalicelib.core.settings import Settings
from chalicelib.counters import breakdowns, reads
from chalicelib.sites import names
from chalicelib.sites import settings as site_settings
from chalicelib.uniques import api as uniques_api

DEFAULT_LIMIT = 10
# Each list: the summary's name for it, the dimension of `site:<site>` it is a breakdown of,
# the name of a value in the list.
LISTS = (
    ("pages", "page", "path"),
    ("referrers", "referrer", "referrer"),
    ("sources", "source", "source"),
    ("devices", "device", "device"),
)
# What GET /sites/{site}/realtime answers: the visitors of these last minutes, page views per minute of these.
VISITOR_MINUTES = 5
PAGEVIEW_MINUTES = 30


def listing(dynamodb: DynamoDB, settings: Settings, params: Mapping[str, str], now_ms: int) -> dict[str, Any]:
    """`{"sites": [{"site", "last_seen"}], "next"}` in name order, one page (core.pager) at a time."""
    request = pager.page_request(params, lambda name: names.site_name(name, "cursor"))
    entries, cursor = catalog.touched_page(dynamodb, settings, names.CATALOG_KIND, request, now_ms)
    return {"sites": [{"site": e.name, "last_seen": times.iso(e.last_seen_ms)} for e in entries], "next": cursor}


def windowed_summary(
    dynamodb: DynamoDB, settings: Settings, site: str, params: Mapping[str, str], now_ms: int
) -> dict[str, Any]:
    """GET /sites/{site}/summary over the window: in `tz`, else in the site's `timezone` once set (the
    one place it applies), else UTC; with `previous` for `compare`."""
    limit = pager.page_limit(params.get("limit"), DEFAULT_LIMIT, breakdowns.MAX_LIMIT)  # the longest list
    stored = site_settings.get(dynamodb, settings, site)
    default_zone = None if stored.updated_ms is None else stored.timezone
    window = window_params.window(params, now_ms, default_zone)
    return window_params.compared(
        window,
        lambda first, last: summary(dynamodb, settings, stored, (first, last), limit, now_ms, window.label),
        zoned=True,
    )


def summary(
    dynamodb: DynamoDB,
    settings: Settings,
    stored: site_settings.SiteSettings,
    minutes: tuple[int, int],
    limit: int,
    now_ms: int,
    label: times.Label,
) -> dict[str, Any]:
    """The summary of a site (its `stored` settings) over minutes first..last, its visitors over the
    quarter hours holding them (`visitors_start`, `visitors_end`: so a local day is exact in any zone)."""
    site = stored.site
    first, last = minutes
    span = uniques_api.minute_span(first, last)
    visitors = uniques_api.window_cardinality(dynamodb, settings, [names.visitors_name(site)], span, now_ms, label)
    answer: dict[str, Any] = {
        "site": site,
        "start": label(first),
        "end": label(last + 1),
        "visitors": visitors["cardinality"],
        "visitors_exact": visitors["exact"],
        "visitors_start": visitors["start"],
        "visitors_end": visitors["end"],
    }
    complete, exact, keys_read, pageviews = visitors["complete"], True, visitors["keys_read"], 0
    others: dict[str, Any] = {}
    counter = names.pageview_counter(site)
    for name, dimension, field in LISTS:
        found = breakdowns.breakdown(dynamodb, settings, counter, dimension, first, last, limit, {}, now_ms)
        answer[name] = [{field: entry["value"], "pageviews": entry["count"]} for entry in found["values"]]
        others[name] = {"values": found["others"]["values"], "pageviews": found["others"]["count"]}
        if name == "pages":  # every page view has a page: the list and what it leaves out are all of them
            pageviews = sum(entry["count"] for entry in found["values"]) + found["others"]["count"]
        complete = complete and found["complete"]
        exact = exact and found["exact"]
        keys_read += found["keys_read"]
    bots = reads.count_window(dynamodb, settings, names.bots_counter(site), first, last, now_ms)
    goal_answers, goal_keys = goals_in_summary(
        dynamodb, settings, stored, minutes, span, visitors["cardinality"], now_ms
    )
    answer.update(others=others, pageviews=pageviews, bots=bots.count, complete=complete, exact=exact)
    answer.update(goals=goal_answers, keys_read=keys_read + bots.keys_read + goal_keys)
    return answer


def goals_in_summary(
    dynamodb: DynamoDB,
    settings: Settings,
    stored: site_settings.SiteSettings,
    minutes: tuple[int, int],
    span: tuple[int, int],
    site_visitors: int,
    now_ms: int,
) -> tuple[list[dict[str, Any]], int]:
    """Each goal's `conversions`, `visitors` (over the site's visitors' `span`) and `conversion_rate`
    over the summary's window (docs/tracker.md, "Goals"), and the keys read."""
    site, answers, keys_read = stored.site, [], 0
    for goal in stored.goals:
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


def realtime(dynamodb: DynamoDB, settings: Settings, site: str, now_ms: int) -> dict[str, Any]:
    """The union of the minute sketches of the site's visitors (uniques.api.recent), and the minute
    series of its page-view counter."""
    site = names.site_name(site)
    last = now_ms // times.MINUTE_MS
    first = last - VISITOR_MINUTES + 1
    visitors = uniques_api.recent(dynamodb, settings, names.visitors_name(site), first, last)
    series = reads.histogram(
        dynamodb, settings, names.pageview_counter(site), last - PAGEVIEW_MINUTES + 1, last, "minute", now_ms
    )
    return {
        "site": site,
        "time": times.iso(now_ms),
        "visitors": visitors["cardinality"],
        "visitors_exact": visitors["exact"],
        "visitors_start": times.iso(first * times.MINUTE_MS),
        "pageviews": [{"start": b["start"], "pageviews": b["count"]} for b in series["buckets"]],
        "pageviews_start": series["start"],
    }
