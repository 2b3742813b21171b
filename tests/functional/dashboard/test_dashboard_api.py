"""What the dashboard reads, on moto: the page and its assets, the counters and views listings
(pagination, empty, bad cursors), report CSV downloads and the quarantine counts."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from chalicelib.core import catalog, catalog_pages, times
from chalicelib.core.errors import StorageError
from chalicelib.core.queues import Message
from chalicelib.core.settings import Settings
from chalicelib.counters import catalog as counter_catalog
from chalicelib.counters import stream
from chalicelib.dashboard import assets
from chalicelib.events.stream_records import from_lambda_event
from chalicelib.views import batches as views_batches
from chalicelib.views.validation import View
from tests.fakes import failing, recording
from tests.functional.helpers import deliver_views, every_page, get, invoke, post_events
from tests.functional.stream_fixtures import image, lambda_event, record, stored_event_records

SETTINGS = Settings()
MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR


def count_stored(client: Any, aws: Any) -> None:
    invoke(client, "on_event_records", lambda_event(stored_event_records(aws.dynamodb)))


# -- the page and its assets ------------------------------------------------------------------


def test_given_the_page_when_loaded_then_html_names_versioned_local_assets_that_are_served_and_cached(
    client: Any,
) -> None:
    page = get(client, "/")
    assert page.headers["Content-Type"].startswith("text/html")
    assert page.headers["Cache-Control"] == "no-cache"
    assert "default-src 'none'" in page.headers["Content-Security-Policy"]
    html = page.body.decode()
    assert "http://" not in html and "https://" not in html  # nothing from a CDN
    for name in ("uPlot.iife.min.js", "uPlot.min.css", "dashboard.js", "dashboard.css"):
        version = assets.asset(name).version
        assert f'"dashboard/{name}?v={version}"' in html  # relative to the page: under any base path
        current = get(client, f"/dashboard/{name}?v={version}")
        assert current.headers["Cache-Control"] == "public, max-age=31536000, immutable"
        assert current.body.decode() == assets.asset(name).body
        stale = get(client, f"/dashboard/{name}?v=0000")
        assert stale.headers["Cache-Control"] == "no-cache"
        revalidated = client.http.get(f"/dashboard/{name}", headers={"If-None-Match": current.headers["ETag"]})
        assert revalidated.status_code == 304 and revalidated.body == b""
    assert get(client, "/dashboard/uPlot.LICENSE").body.startswith(b"The MIT License")


def test_given_the_page_when_loaded_then_it_links_the_apis_openapi_document_which_needs_no_key(
    client: Any,
) -> None:
    html = get(client, "/").body.decode()
    assert 'href="openapi.json"' in html
    assert client.http.with_key(None).get("/openapi.json").status_code == 200


@pytest.mark.parametrize("name", ["missing.js", ".pins", "index.html", "dashboard.py", "..%2Fassets.py"])
def test_given_a_name_that_is_not_an_asset_when_asked_then_404(client: Any, name: str) -> None:
    response = get(client, f"/dashboard/{name}", 404)
    assert set(response.json_body) == {"Code", "Message"}


# -- GET /counters ----------------------------------------------------------------------------


def test_given_no_counters_when_listed_then_empty_page_without_next(client: Any, clock: Any) -> None:
    assert get(client, "/counters").json_body == {"counters": [], "next": None}


def test_given_counted_events_when_listed_in_pages_then_every_counter_once_in_name_order(
    client: Any, app_module: Any, aws: Any, clock: Any
) -> None:
    names = [f"jobs.provider-{i}" for i in range(7)]
    post_events(client, [{"counter": n, "time": clock.now - i * MINUTE} for i, n in enumerate(names * 3)])
    count_stored(client, aws)
    for limit in (1, 3, 7, 100):
        entries, pages = every_page(client, "/counters", "counters", limit)
        assert [e["name"] for e in entries] == sorted(names)
        assert pages >= -(-len(names) // limit)
    first = get(client, "/counters").json_body["counters"][0]
    assert set(first) == {"name", "last_counted"}
    assert first["last_counted"].startswith("2026-11-")


def listed(client: Any) -> list[str]:
    return [e["name"] for e in get(client, "/counters").json_body["counters"]]


def count(dynamodb: Any, images: list[dict[str, Any]], now: int) -> int:
    """One stream batch of `images`; returns the counters it logged for the listing (in at most
    one log write)."""
    calls: list[dict[str, Any]] = []
    records = from_lambda_event(lambda_event([record(i) for i in images]))
    stream.apply_stream_batch(recording(dynamodb, "put_item", calls), SETTINGS, records, now)
    logged = [c for c in calls if c["Item"]["pk"]["S"] == catalog.log_pk(counter_catalog.KIND)]
    assert len(logged) <= 1
    return sum(len(catalog_pages.unpack(c["Item"]["e"]["B"])) for c in logged)


def test_given_counters_counted_all_day_when_the_stream_counts_them_then_each_counter_logged_once_a_day(
    client: Any, aws: Any, clock: Any
) -> None:
    day_start = clock.now - clock.now % DAY
    writes = [
        count(
            aws.dynamodb, [image("p#0", f"c{i % 3}", day_start + h * HOUR + i) for i in range(30)], day_start + h * HOUR
        )
        for h in range(0, 24, 3)
    ]
    assert writes == [3, 0, 0, 0, 0, 0, 0, 0]
    assert listed(client) == ["c0", "c1", "c2"]
    # The next day: each counter's new day bucket lists it once more.
    assert (
        count(aws.dynamodb, [image("p#0", f"c{i % 3}", day_start + DAY + i) for i in range(30)], clock.now + DAY) == 3
    )


def test_given_a_batch_dying_before_its_listing_when_redelivered_then_the_counter_is_listed(
    client: Any, aws: Any, clock: Any
) -> None:
    records = [record(image("p#0", "late.listed", clock.now - i * MINUTE)) for i in range(5)]
    catalog_down = failing(
        aws.dynamodb, "put_item", "ServiceUnavailable", lambda kw: kw["Item"]["pk"]["S"].startswith("CATALOG#")
    )
    with pytest.raises(StorageError):
        stream.apply_stream_batch(catalog_down, SETTINGS, from_lambda_event(lambda_event(records)), clock.now)
    assert listed(client) == []  # the buckets are written, the listing is not

    again = stream.apply_stream_batch(aws.dynamodb, SETTINGS, from_lambda_event(lambda_event(records)), clock.now)

    assert again.counted == 0 and listed(client) == ["late.listed"]
    assert get(client, "/counters/late.listed?window=1h").json_body["count"] == 5


def test_given_a_counter_counted_only_in_an_old_day_when_listed_then_shown_while_a_window_can_find_it(
    client: Any, aws: Any, clock: Any
) -> None:
    old = clock.now - 5 * DAY
    count(aws.dynamodb, [image("p#0", "old.only", old, retention=10 * 86400)], clock.now)
    count(aws.dynamodb, [image("p#0", "both", clock.now, retention=30 * 86400)], clock.now)
    # An old day counted later must not shorten the life of the listing of a counter counted today.
    count(aws.dynamodb, [image("p#0", "both", old, retention=10 * 86400)], clock.now)
    assert listed(client) == ["both", "old.only"]
    assert get(client, f"/counters/old.only?window=7d&end={clock.now}").json_body["count"] == 1

    clock.advance(6 * DAY + HOUR)  # the old day's bucket has expired (its end + 10 days): no window finds it
    assert listed(client) == ["both"]


def test_given_a_longer_retention_later_in_the_day_when_listed_then_the_listing_lives_as_long(
    client: Any, aws: Any, clock: Any
) -> None:
    count(aws.dynamodb, [image("p#0", "short", clock.now, retention=60)], clock.now)
    count(aws.dynamodb, [image("p#0", "grown", clock.now, retention=60)], clock.now)
    assert count(aws.dynamodb, [image("p#0", "grown", clock.now, retention=30 * 86400)], clock.now + 1000) == 1
    assert count(aws.dynamodb, [image("p#0", "grown", clock.now, retention=60)], clock.now + 2000) == 0
    clock.advance(3 * DAY)
    assert listed(client) == ["grown"]


def test_given_an_older_write_when_it_lands_after_a_newer_one_then_last_counted_does_not_go_back(
    aws: Any, client: Any, clock: Any
) -> None:
    expiry = {"x": clock.now // 1000 + 86400}
    counter_catalog.list_counters(aws.dynamodb, SETTINGS, expiry, clock.now + HOUR)
    counter_catalog.list_counters(aws.dynamodb, SETTINGS, expiry, clock.now)  # another process, earlier
    (entry,) = get(client, "/counters").json_body["counters"]
    assert entry["last_counted"] == times.iso(clock.now + HOUR)


def b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "query",
    [
        "cursor=%%%",
        "cursor=" + b64("bad name with spaces"),
        "cursor=" + base64.urlsafe_b64encode(b"\xff\xfe").decode(),
        "cursor=" + "A" * 2000,
        "limit=0",
        "limit=1001",
        "limit=ten",
    ],
)
def test_given_a_bad_cursor_or_limit_when_counters_listed_then_400_in_chalice_shape(client: Any, query: str) -> None:
    response = get(client, f"/counters?{query}", 400)
    assert set(response.json_body) == {"Code", "Message"}


# -- GET /views/urls --------------------------------------------------------------------------


def test_given_no_views_when_urls_listed_then_empty_page(client: Any, clock: Any) -> None:
    assert get(client, "/views/urls").json_body == {"urls": [], "next": None}


def test_given_views_of_many_urls_when_listed_in_pages_then_each_url_once_with_its_exact_count(
    aws: Any, client: Any, clock: Any
) -> None:
    expected = {f"https://blog.example/post-{i}?q=a b&x=é": i + 1 for i in range(9)}
    views = [View(url, clock.now + k * 1000, f"client-{k}") for url, n in expected.items() for k in range(n)]
    deliver_views(aws, views, clock.now)
    deliver_views(aws, views[:10], clock.now)  # a redelivery counts nothing twice
    for limit in (2, 9, 1000):
        entries, _ = every_page(client, "/views/urls", "urls", limit)
        assert {e["url"]: e["views"] for e in entries} == expected
        assert len(entries) == len(expected)
    assert set(entries[0]) == {"url", "views", "last_counted"}
    # The single-URL read is unchanged.
    url = next(iter(expected))
    assert get(client, "/views?url=" + url.replace("&", "%26").replace(" ", "%20")).json_body["views"] == 1


@pytest.mark.parametrize("cursor", ["%%%", b64("URL#abc"), b64("g" * 64), b64("a" * 63)])
def test_given_a_bad_cursor_when_urls_listed_then_400(client: Any, cursor: str) -> None:
    assert set(get(client, f"/views/urls?cursor={cursor}", 400).json_body) == {"Code", "Message"}


# -- report downloads -------------------------------------------------------------------------


def test_given_a_report_when_downloaded_as_csv_then_text_csv_equal_to_the_stored_object(
    client: Any, aws: Any, clock: Any
) -> None:
    post_events(client, [{"counter": "sales", "attributes": {"amount": 2.5}}, {"counter": "signups"}])
    clock.advance(SETTINGS.report_settle_seconds * 1000 + 1000)
    assert client.http.post("/reports", headers={"Content-Type": "application/json"}, body="{}").status_code == 201
    (report,) = get(client, "/reports").json_body["reports"]
    stored = aws.s3.get_object(Bucket=SETTINGS.reports_bucket, Key=f"reports/{report['id']}.csv")["Body"].read()
    assert stored.decode() == "counter,events,amount\r\nsales,1,2.5\r\nsignups,1,\r\n"
    for path in (f"/reports/{report['id']}.csv", f"/reports/{report['id']}?format=csv"):
        response = get(client, path)
        assert response.headers["Content-Type"].startswith("text/csv")
        assert response.headers["Content-Disposition"] == f'attachment; filename="{report["id"]}.csv"'
        assert response.body == stored
    assert get(client, f"/reports/{report['id']}?format=json").json_body["id"] == report["id"]
    assert get(client, f"/reports/{report['id']}.json").json_body["events"] == 2
    assert get(client, f"/reports/{report['id']}.csv?format=json", 400)
    assert get(client, f"/reports/{report['id']}?format=xml", 400)
    assert get(client, "/reports/20201121T230000000Z-20201122T000000000Z.csv", 404)
    assert get(client, "/reports/not-an-id.csv", 400)


# -- quarantine counts ------------------------------------------------------------------------


def test_given_records_set_aside_when_counted_then_per_source_including_the_views_dead_letter_queue(
    client: Any, app_module: Any, aws: Any, clock: Any
) -> None:
    before = get(client, "/quarantine/counts").json_body["sources"]
    assert {s["source"]: s["records"] for s in before} == {
        "events-stream": 0,
        "uniques-queue": 0,
        "views-dead-letter-queue": 0,
    }
    bad = {"pk": {"S": "202611180000#0"}, "sk": {"S": "x"}, "kind": {"S": "event"}, "counter": {"S": "bad name"}}
    invoke(client, "on_event_records", lambda_event([record(bad), record({**bad, "sk": {"S": "y"}})]))
    poison = [Message("p1", "r1", "not json")]
    views_batches.apply_messages(aws.dynamodb, aws.sqs, SETTINGS, poison, clock.now)
    after = {s["source"]: s for s in get(client, "/quarantine/counts").json_body["sources"]}
    assert after["events-stream"] == {"source": "events-stream", "records": 2, "complete": True}
    assert after["views-dead-letter-queue"]["records"] == 1
    assert after["views-dead-letter-queue"]["approximate"] is True
