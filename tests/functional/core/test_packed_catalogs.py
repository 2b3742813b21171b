"""The packed listings (`GET /counters`, `GET /views/urls`): handlers log new names, one item a
batch; the scheduled fold merges the log into pages. Names appear before and after the fold,
redelivered batches list nothing twice, expired names disappear, and paging crosses pages and
log."""

from __future__ import annotations

from typing import Any

from chalicelib.core import catalog, catalog_pages
from chalicelib.core.settings import Settings
from chalicelib.counters import catalog as counter_catalog
from chalicelib.views import catalog as view_catalog
from chalicelib.views.validation import View
from tests.fakes import Dying, Killed, Patched, recording
from tests.functional.helpers import deliver_views, every_page, get, invoke, partition, post_events
from tests.functional.stream_fixtures import lambda_event, stored_event_records

SETTINGS = Settings()
DAY_S = 86_400


def count_stream(client: Any, aws: Any, records: list[dict[str, Any]] | None = None) -> None:
    """Deliver `records` (by default every stored event) to the stream handler."""
    invoke(client, "on_event_records", lambda_event(records or stored_event_records(aws.dynamodb)))


def fold(client: Any) -> dict[str, Any]:
    event = client.events.generate_cw_event("aws.events", "Scheduled Event", {}, [])
    result: dict[str, Any] = invoke(client, "fold_catalogs", event)["folded"]
    return result


def listed(client: Any, path: str, field: str, key: str, limit: int = 1000) -> list[str]:
    entries, _ = every_page(client, path, field, limit)
    return [e[key] for e in entries]


def logs(aws: Any, kind: str) -> list[dict[str, Any]]:
    return partition(aws.dynamodb, catalog.log_pk(kind))


def unfolded(aws: Any, kind: str) -> list[dict[str, Any]]:
    """The log items a listing still reads (after the fold's mark); folded ones wait for their TTL."""
    return catalog._logs_to_read(aws.dynamodb, SETTINGS, kind)


def pages(aws: Any, kind: str) -> list[dict[str, Any]]:
    return partition(aws.dynamodb, catalog.pages_pk(kind))


def test_given_new_counters_when_counted_then_one_log_write_per_batch_and_listed_before_and_after_the_fold(
    client: Any, aws: Any, clock: Any
) -> None:
    names = [f"c.{i:03d}" for i in range(60)]
    post_events(client, [{"counter": n, "time": clock.now} for n in names])
    count_stream(client, aws)

    assert len(logs(aws, "counters")) == 1  # 60 new counters, one small write
    assert listed(client, "/counters", "counters", "name") == names
    result = fold(client)
    assert result["counters"]["logs"] == 1 and result["counters"]["pages_written"] == 1
    assert unfolded(aws, "counters") == [] and len(pages(aws, "counters")) == 1
    assert len(logs(aws, "counters")) == 1  # not deleted (a delete is charged as a write): it expires
    assert int(logs(aws, "counters")[0]["expires_at"]["N"]) == clock.now // 1000 + catalog.LOG_LIFE_S
    body = get(client, "/counters").json_body
    assert [c["name"] for c in body["counters"]] == names and body["next"] is None
    assert fold(client)["counters"] == catalog.Folded().as_dict()  # nothing logged: nothing to do


def test_given_a_batch_delivered_again_before_and_after_the_fold_then_each_counter_once(
    client: Any, aws: Any, clock: Any
) -> None:
    names = sorted(f"dup.{i}" for i in range(30))
    post_events(client, [{"counter": n, "time": clock.now} for n in names])
    records = stored_event_records(aws.dynamodb)
    count_stream(client, aws, records)
    count_stream(client, aws, records)  # found applied: logged again
    assert len(logs(aws, "counters")) == 1  # the same names at the same time: the same item, rewritten
    assert listed(client, "/counters", "counters", "name", 7) == names
    fold(client)
    count_stream(client, aws, records)
    assert listed(client, "/counters", "counters", "name", 4) == names
    fold(client)
    assert listed(client, "/counters", "counters", "name", 1000) == names
    assert get(client, "/counters/dup.3?window=1h").json_body["count"] == 1


def test_given_counters_whose_counts_expired_then_they_disappear_from_the_listing_and_the_pages(
    client: Any, aws: Any, clock: Any
) -> None:
    post_events(client, [{"counter": "short", "time": clock.now, "retention": 3600}])
    post_events(client, [{"counter": "long", "time": clock.now, "retention": 30 * DAY_S}])
    count_stream(client, aws)
    fold(client)
    assert listed(client, "/counters", "counters", "name") == ["long", "short"]

    clock.advance(3 * DAY_S * 1000)  # the short counter's day bucket has expired
    assert listed(client, "/counters", "counters", "name") == ["long"]
    counter_catalog.list_counters(aws.dynamodb, SETTINGS, {"other": clock.now // 1000 + DAY_S}, clock.now)
    fold(client)  # rewrites the page: the expired entry is dropped from it
    (page,) = pages(aws, "counters")
    assert [e.name for e in catalog_pages.unpack(page["e"]["B"])] == ["long", "other"]


def test_given_many_pages_and_a_log_when_paged_with_any_limit_then_each_name_once_in_order(
    client: Any, aws: Any, clock: Any
) -> None:
    now = clock.now
    expires = now // 1000 + DAY_S
    long_names = {f"{'p' * 150}.{i:04d}": expires for i in range(400)}  # ~160 names a page
    counter_catalog.list_counters(aws.dynamodb, SETTINGS, long_names, now)
    fold(client)
    assert len(pages(aws, "counters")) >= 3
    logged = {f"{'p' * 150}.{i:04d}x": expires for i in range(0, 400, 37)}  # between folded names
    counter_catalog.list_counters(aws.dynamodb, SETTINGS, logged, now)
    expected = sorted({*long_names, *logged})
    for folded, limit in [(False, 1), (False, 7), (False, 100), (False, 161), (False, 1000), (True, 3), (True, 1000)]:
        if folded and limit == 3:
            fold(client)
        clock.advance(1000)  # a second per listing: the key's rate (500 a second) is not what is tested
        assert listed(client, "/counters", "counters", "name", limit) == expected, limit


def test_given_new_urls_when_views_counted_then_logged_once_listed_and_found_by_digest_after_the_fold(
    client: Any, aws: Any, clock: Any
) -> None:
    urls = [f"https://site.example/{i}" for i in range(40)]
    views = [View(url, clock.now, f"c{i}") for i, url in enumerate(urls)]
    deliver_views(aws, views, clock.now)
    deliver_views(aws, views, clock.now)  # redelivered: counted and listed once
    assert len(logs(aws, "views")) == 1
    assert sorted(listed(client, "/views/urls", "urls", "url", 9)) == sorted(urls)
    fold(client)
    assert unfolded(aws, "views") == []
    body = listed(client, "/views/urls", "urls", "url", 9)
    assert sorted(body) == sorted(urls) and len(body) == len(urls)
    shas = [p["pk"]["S"].removeprefix("URL#") for p in aws.dynamodb.scan(TableName=SETTINGS.counts_table)["Items"]]
    shas = sorted({s for s in shas if len(s) == 64})
    found, read = view_catalog.shas_of(aws.dynamodb, SETTINGS, [s[:16] for s in shas], clock.now)
    assert all(found[s[:16]] == [s] for s in shas) and read >= len(shas)
    answer = get(client, "/views/top?window=1h&limit=5").json_body
    assert len(answer["urls"]) == 5 and all(u["url"] in urls for u in answer["urls"])


def long_names(prefix: str, n: int, expires: int, suffix: str = "") -> dict[str, int | None]:
    return {f"{prefix}{'q' * 150}.{i:04d}{suffix}": expires for i in range(n)}  # ~160 a page


def test_given_a_fold_that_dies_after_any_write_then_every_name_stays_listed_and_the_next_fold_tidies(
    client: Any, aws: Any, clock: Any
) -> None:
    expires = clock.now // 1000 + DAY_S
    counter_catalog.list_counters(aws.dynamodb, SETTINGS, long_names("a", 300, expires), clock.now)
    catalog.fold(aws.dynamodb, SETTINGS, "counters", clock.now)
    counter_catalog.list_counters(aws.dynamodb, SETTINGS, long_names("a", 300, expires, "b"), clock.now)
    # Logged in the millisecond the first fold closed: written again just after its mark.
    assert f"{clock.now + 1:013d}" in [i["sk"]["S"][:13] for i in unfolded(aws, "counters")]
    clock.advance(1000)
    expected = sorted({*long_names("a", 300, expires), *long_names("a", 300, expires, "b")})  # every page grows
    die_on = 1
    while True:  # the fold dies before its 1st, 2nd, ... write until one run gets through
        dying = Dying(aws.dynamodb, die_on, methods=("put_item", "delete_item"))
        try:
            catalog.fold(dying, SETTINGS, "counters", clock.now)
        except Killed:
            assert listed(client, "/counters", "counters", "name", 97) == expected, die_on
            die_on += 1
            continue
        break
    # Each run resumes where the last died (written pages are unchanged, so not written again):
    # deaths came after the mark closed and between page writes.
    assert die_on > 3
    catalog.fold(aws.dynamodb, SETTINGS, "counters", clock.now)
    stored = [e.name for page in pages(aws, "counters") for e in catalog_pages.unpack(page["e"]["B"])]
    assert stored == expected and unfolded(aws, "counters") == []


def test_given_two_folds_at_once_then_the_one_that_finds_a_page_changed_deletes_nothing(
    client: Any, aws: Any, clock: Any
) -> None:
    expires = clock.now // 1000 + DAY_S
    counter_catalog.list_counters(aws.dynamodb, SETTINGS, {"first": expires}, clock.now)
    catalog.fold(aws.dynamodb, SETTINGS, "counters", clock.now)
    clock.advance(1000)
    counter_catalog.list_counters(aws.dynamodb, SETTINGS, {"second": expires}, clock.now)
    others: list[catalog.Folded] = []

    def first_the_other_fold(**kwargs: Any) -> Any:
        if not others:  # another fold, with a log item of its own, gets there first
            counter_catalog.list_counters(aws.dynamodb, SETTINGS, {"third": expires}, clock.now + 1)
            others.append(catalog.fold(aws.dynamodb, SETTINGS, "counters", clock.now + 2))
        return aws.dynamodb.put_item(**kwargs)

    raced = catalog.fold(Patched(aws.dynamodb, put_item=first_the_other_fold), SETTINGS, "counters", clock.now)
    assert raced.raced and raced.logs == 0 and not others[0].raced
    assert listed(client, "/counters", "counters", "name") == ["first", "second", "third"]
    assert unfolded(aws, "counters") == []


def test_given_a_name_logged_after_the_fold_read_the_log_then_it_is_written_again_past_the_mark_and_stays_listed(
    client: Any, aws: Any, clock: Any
) -> None:
    expires = clock.now // 1000 + DAY_S
    counter_catalog.list_counters(aws.dynamodb, SETTINGS, {"early": expires}, clock.now - 5)
    late: list[int] = []
    log_reads: list[int] = []

    def query_then_a_late_writer(**kwargs: Any) -> Any:
        answer = aws.dynamodb.query(**kwargs)
        if kwargs["ExpressionAttributeValues"][":pk"]["S"] == catalog.log_pk("counters"):
            log_reads.append(1)
        if len(log_reads) == 2 and not late:  # the read after the fold closed the log
            # A batch whose clock reads before the fold's mark logs just after the fold read the log.
            late.append(counter_catalog.list_counters(aws.dynamodb, SETTINGS, {"late": expires}, clock.now - 1))
        return answer

    folded = catalog.fold(Patched(aws.dynamodb, query=query_then_a_late_writer), SETTINGS, "counters", clock.now)

    assert folded.logs == 1 and late == [2]  # the late item was written twice: before and after the mark
    assert listed(client, "/counters", "counters", "name") == ["early", "late"]
    clock.advance(1000)
    assert catalog.fold(aws.dynamodb, SETTINGS, "counters", clock.now).logs == 2  # both copies: one entry
    assert unfolded(aws, "counters") == [] and listed(client, "/counters", "counters", "name") == ["early", "late"]


def test_given_nothing_logged_since_the_last_fold_when_it_runs_then_it_writes_nothing(
    client: Any, aws: Any, clock: Any
) -> None:
    counter_catalog.list_counters(aws.dynamodb, SETTINGS, {"once": clock.now // 1000 + DAY_S}, clock.now)
    catalog.fold(aws.dynamodb, SETTINGS, "counters", clock.now + 1)
    writes: list[dict[str, Any]] = []
    recorded = recording(
        recording(recording(aws.dynamodb, "put_item", writes), "update_item", writes), "delete_item", writes
    )

    assert catalog.fold(recorded, SETTINGS, "counters", clock.now + 60_000) == catalog.Folded()
    assert writes == [] and listed(client, "/counters", "counters", "name") == ["once"]
