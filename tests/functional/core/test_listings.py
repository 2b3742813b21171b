"""Every listing pages the same way (core.pager): `limit` and `cursor` in, `next` out; paging
through with any limit returns every item exactly once; a bad cursor or limit is a 400."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from chalicelib.core import catalog, pager, quarantine
from chalicelib.core.settings import Settings
from chalicelib.counters import catalog as counter_catalog
from chalicelib.reports.runs import INDEX_PK
from chalicelib.sites import names as site_keys
from chalicelib.uniques import layout as unique_keys
from chalicelib.views.validation import View
from tests.conftest import create_key
from tests.functional.helpers import deliver_views, every_page, get

SETTINGS = Settings()
HOUR = 3_600_000
COUNT = 7


def seed_counters(aws: Any, now: int) -> set[str]:
    names = {f"jobs.p{i}" for i in range(COUNT)}
    counter_catalog.list_counters(aws.dynamodb, SETTINGS, {n: now // 1000 + 90_000 for n in names}, now)
    return names


def seed_urls(aws: Any, now: int) -> set[str]:
    urls = {f"https://site.example/{i}" for i in range(COUNT)}
    deliver_views(aws, [View(url, now, "c") for url in urls], now)
    return urls


def seed_unique_names(aws: Any, now: int) -> set[str]:
    names = {f"visitors.{i}" for i in range(COUNT)}
    for name in names:
        aws.dynamodb.put_item(
            TableName=SETTINGS.counts_table, Item={**unique_keys.name_key(name), "last_seen": {"N": str(now)}}
        )
    return names


def seed_reports(aws: Any, now: int) -> set[str]:
    ids = set()
    for i in range(COUNT):
        start = now - (i + 1) * HOUR
        report_id = f"2026111{i}T000000000Z-2026111{i}T010000000Z"
        ids.add(report_id)
        item = {"start_ms": start, "end_ms": start + HOUR, "events": i}
        aws.dynamodb.put_item(
            TableName=SETTINGS.counts_table,
            Item={"pk": {"S": INDEX_PK}, "sk": {"S": report_id}, **{k: {"N": str(v)} for k, v in item.items()}},
        )
    return ids


def seed_keys(aws: Any, now: int) -> set[str]:
    for i in range(COUNT - 1):  # the client's own admin key makes COUNT
        create_key(aws, ["read"], note=f"k{i}")
    return set()  # ids are random: checked by count and uniqueness only


def seed_quarantine(aws: Any, now: int) -> set[str]:
    ids = set()
    for i in range(COUNT):
        source = quarantine.SOURCES[i % 2]
        quarantine.put(aws.dynamodb, SETTINGS, source, f"rec#{i}", "{}", "bad", now)
        ids.add(f"rec#{i}")
    return ids


def seed_sites(aws: Any, now: int) -> set[str]:
    names = {f"site{i}.example" for i in range(COUNT)}
    catalog.touch(aws.dynamodb, SETTINGS, site_keys.CATALOG_KIND, catalog.Recent(), dict.fromkeys(names), now)
    return names


Seed = Callable[[Any, int], set[str]]
LISTINGS: list[tuple[str, str, str, Seed]] = [
    ("/counters", "counters", "name", seed_counters),
    ("/views/urls", "urls", "url", seed_urls),
    ("/hyperloglog", "names", "name", seed_unique_names),
    ("/reports", "reports", "id", seed_reports),
    ("/keys", "keys", "id", seed_keys),
    ("/quarantine", "records", "id", seed_quarantine),
    ("/sites", "sites", "site", seed_sites),
]
IDS = [path for path, *_ in LISTINGS]


@pytest.mark.parametrize(("path", "field", "key", "seed"), LISTINGS, ids=IDS)
def test_given_items_when_a_listing_is_paged_with_any_limit_then_each_item_exactly_once(
    client: Any, aws: Any, clock: Any, path: str, field: str, key: str, seed: Seed
) -> None:
    expected = seed(aws, clock.now)
    for limit in (1, 2, 3, COUNT, COUNT + 1, 1000):
        entries, pages = every_page(client, path, field, limit)
        found = [entry[key] for entry in entries]
        assert len(found) == len(set(found)) == COUNT, (limit, found)
        assert not expected or set(found) == expected
        assert pages >= -(-COUNT // limit)  # no page held more than `limit`
    if path == "/reports":  # newest first (report ids order like their times), across pages too
        ids = [e["id"] for e in every_page(client, path, field, 2)[0]]
        assert ids == sorted(ids, reverse=True)


@pytest.mark.parametrize(("path", "field", "key", "seed"), LISTINGS, ids=IDS)
@pytest.mark.parametrize(
    "query",
    [
        "cursor=%25%25%25",
        "cursor=" + pager.encode_cursor("no such position, not a name"),
        "limit=1001",
    ],
)
def test_given_a_bad_cursor_or_limit_when_any_listing_is_read_then_400_in_chalice_shape(
    client: Any, aws: Any, clock: Any, path: str, field: str, key: str, seed: Seed, query: str
) -> None:
    response = get(client, f"{path}?{query}", 400)
    assert set(response.json_body) == {"Code", "Message"}


def test_given_one_quarantine_source_when_listed_then_a_cursor_of_another_source_is_refused(
    client: Any, aws: Any, clock: Any
) -> None:
    seed_quarantine(aws, clock.now)
    body = get(client, "/quarantine?limit=1").json_body
    assert body["records"][0]["source"] == quarantine.SOURCES[0]
    assert get(client, f"/quarantine?source={quarantine.SOURCES[1]}&cursor={body['next']}", 400)
    assert get(client, "/quarantine?source=elsewhere", 400)
    paged, _ = every_page(client, f"/quarantine?source={quarantine.SOURCES[1]}", "records", 1)
    assert {r["source"] for r in paged} == {quarantine.SOURCES[1]} and len(paged) == COUNT // 2
