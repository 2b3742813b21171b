"""`GET /sites/{site}/summary`: a site's visitors, page views, page views refused as bots'
and top pages, referrers, sources and devices over a window, each list a breakdown of the
site's counters (sites.names).

Reads: the visitors' hour and day sketches (uniques, one BatchGetItem), four breakdowns
(counters.breakdowns: page, referrer, source and device of `site:<site>`), each a bounded read
whatever the number of page views or pages, and one count window of `site-bots:<site>` (the
window's days and end hours: at most 426 keys, 5 BatchGetItem calls, for 400 days). What it costs:
docs/tracker.md, "What you see". The
UTM mediums and campaigns are breakdowns of `site-utm:<site>`
(`GET /counters/site-utm:<site>/breakdown?by=medium`), left out here to keep that bound."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chalicelib.core import pager, timebuckets, times, window_params
from chalicelib.core.aws import DynamoDB
from chalicelib.core.settings import Settings
from chalicelib.counters import breakdowns, reads
from chalicelib.sites import goals, names
from chalicelib.sites import settings as site_settings
from chalicelib.uniques import api as uniques_api

DEFAULT_LIMIT = 10
# How long a site's page views (its events) are kept: the longest window a summary answers, as
# the visitors' day sketches are kept (UNIQUES_DAY_RETENTION_SECONDS), so every summary is whole.
RETENTION_SECONDS = window_params.MAX_WINDOW_DAYS * times.DAY_MS // 1000
# Each list: the summary's name for it, the dimension of `site:<site>` it is a breakdown of,
# the name of a value in the list.
LISTS = (
    ("pages", "page", "path"),
    ("referrers", "referrer", "referrer"),
    ("sources", "source", "source"),
    ("devices", "device", "device"),
)


def parse_limit(params: Mapping[str, str]) -> int:
    """`limit`: the longest list (1-1000, default 10), as a breakdown's."""
    return pager.page_limit(params.get("limit"), DEFAULT_LIMIT, breakdowns.MAX_LIMIT)


def visitor_hours(first: int, last: int) -> tuple[int, int]:
    """The hours holding minutes first..last, so that every page view counted has its visitor
    counted (a window of 1h read at 17:00:05 holds page views of 16:01-17:00: hours 16 and 17).
    A longest window not starting on the hour touches one hour more than a window may span:
    that oldest hour is left out (its minutes, 400 days ago, are read from its whole day's
    sketch whenever hour sketches are kept less long, as by default: timebuckets.hour_day_plan)."""
    low, high = timebuckets.hours_between(first, last)
    return max(low, high - window_params.MAX_WINDOW_HOURS + 1), high


def summary(
    dynamodb: DynamoDB,
    settings: Settings,
    site: str,
    minutes: tuple[int, int],
    limit: int,
    now_ms: int,
) -> dict[str, Any]:
    """The summary of `site` over minutes first..last; its visitors over the hours holding them
    (unique counts are hour-aligned: `visitors_start`, `visitors_end`)."""
    site = names.site_name(site)
    first, last = minutes
    hours = visitor_hours(first, last)
    visitors = uniques_api.window_cardinality(dynamodb, settings, [names.visitors_name(site)], hours, now_ms)
    answer: dict[str, Any] = {
        "site": site,
        "start": times.iso(first * times.MINUTE_MS),
        "end": times.iso((last + 1) * times.MINUTE_MS),
        "visitors": visitors["cardinality"],
        "visitors_exact": visitors["exact"],
        "visitors_start": visitors["start"],
        "visitors_end": visitors["end"],
    }
    complete, exact, keys_read, pageviews = True, True, visitors["keys_read"], 0
    others: dict[str, Any] = {}
    counter = names.pageview_counter(site)
    for name, dimension, label in LISTS:
        found = breakdowns.breakdown(dynamodb, settings, counter, dimension, first, last, limit, {}, now_ms)
        answer[name] = [{label: entry["value"], "pageviews": entry["count"]} for entry in found["values"]]
        others[name] = {"values": found["others"]["values"], "pageviews": found["others"]["count"]}
        if name == "pages":  # every page view has a page: the list and what it leaves out are all of them
            pageviews = sum(entry["count"] for entry in found["values"]) + found["others"]["count"]
        complete = complete and found["complete"]
        exact = exact and found["exact"]
        keys_read += found["keys_read"]
    bots = reads.count_window(dynamodb, settings, names.bots_counter(site), first, last, now_ms)
    complete = complete and visitors["complete"]
    site_goals = site_settings.read(dynamodb, settings, site)
    goal_answers, goal_keys = goals.in_summary(
        dynamodb, settings, site_goals, minutes, hours, visitors["cardinality"], now_ms
    )
    answer.update(others=others, pageviews=pageviews, bots=bots.count, complete=complete, exact=exact)
    answer.update(goals=goal_answers, keys_read=keys_read + bots.keys_read + goal_keys)
    return answer
