"""GET /views/top on moto against brute force: random windows, redelivery, a handler dying
half-way, concurrent summary updates, and summaries too small to hold every URL.

Kept small: moto answers a Query by comparing every item of the table, and a top read makes
one Query per candidate it examines (DynamoDB reads only the items of the key range)."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any
from urllib.parse import urlencode

import pytest

from chalicelib.core import log_fold, timebuckets
from chalicelib.views import top, top_store
from tests.fakes import Forwarding, Killed
from tests.functional.helpers import deliver, post_all, receive_all

HOUR = 3_600_000
DAY = 24 * HOUR
SIZES = (("hour", HOUR), ("day", DAY), ("block", 32 * DAY))


def top_answer(client: Any, **params: Any) -> Any:
    response = client.http.get("/views/top?" + urlencode(params))
    assert response.status_code == 200, response.body
    return response.json_body


def brute(bodies: list[dict[str, Any]], start_ms: int, end_ms: int, prefix: str | None = None) -> Counter[str]:
    """Distinct views per URL whose time lies in [start, end)."""
    distinct = {(b["url"], b["time"], b["clientId"]) for b in bodies if start_ms <= b["time"] < end_ms}
    return Counter(url for url, _, _ in distinct if prefix is None or url.startswith(prefix))


def iso_ms(text: str) -> int:
    from chalicelib.core import times

    return times.parse(text, "time")


def assert_top_exact(
    client: Any, bodies: list[dict[str, Any]], limit: int, prefix: str | None = None, **window: Any
) -> Any:
    params = {**window, "limit": limit, **({"prefix": prefix} if prefix else {})}
    answer = top_answer(client, **params)
    truth = brute(bodies, iso_ms(answer["start"]), iso_ms(answer["end"]), prefix)
    ranked = sorted(truth.items(), key=lambda uv: (-uv[1], uv[0]))
    listed = [(row["url"], row["views"]) for row in answer["urls"]]
    assert all(truth[url] == views for url, views in listed), "listed views are exact"
    assert [v for _, v in listed] == [v for _, v in ranked[:limit]], (params, listed, ranked[:limit])
    assert answer["exact"] is True and answer["complete"] is True
    beyond = [v for url, v in ranked if url not in dict(listed)]
    # With a prefix, `others` counts only the URLs it had to resolve anyway: complete or not, never more.
    if prefix is None or answer["others"]["complete"]:
        assert answer["others"] == {"urls": len(beyond), "views": sum(beyond), "complete": True}
    else:
        assert answer["others"]["urls"] <= len(beyond) and answer["others"]["views"] <= sum(beyond)
    return answer


def views_over(rng: random.Random, now: int, urls: int, n: int, days: int) -> list[dict[str, Any]]:
    """n views, Zipf-like over the URLs, spread over `days` before now, a tenth of them repeats."""
    weights = [1 / (i + 1) for i in range(urls)]
    bodies: list[dict[str, Any]] = []
    for _ in range(n):
        if bodies and rng.random() < 0.1:
            bodies.append(dict(rng.choice(bodies)))
            continue
        i = rng.choices(range(urls), weights)[0]
        site = "https://blog.example/" if i % 2 else "https://shop.example/"
        bodies.append(
            {"url": f"{site}{i}", "time": now - rng.randrange(days * DAY), "clientId": f"c{rng.randrange(9)}"}
        )
    return bodies


def count_in_phases(client: Any, aws: Any, clock: Any, rng: random.Random, phases: int) -> list[dict[str, Any]]:
    """Views over phases x 12 days (within the views horizon each time), each phase's batch
    delivered in shuffled parts and then all over again."""
    every: list[dict[str, Any]] = []
    for _ in range(phases):
        bodies = views_over(rng, clock.now, urls=15, n=50, days=12)
        post_all(client, bodies)
        messages = receive_all(aws)
        rng.shuffle(messages)
        for part in (messages[:30], messages[30:]):
            deliver(client, part)
        again = deliver(client, messages)
        assert again["counted"] == 0
        every += bodies
        clock.advance(12 * DAY)
    return every


def test_given_views_over_five_weeks_when_random_windows_read_then_top_urls_equal_brute_force(
    client: Any, aws: Any, clock: Any
) -> None:
    rng = random.Random(22)
    bodies = count_in_phases(client, aws, clock, rng, phases=3)
    low = min(b["time"] for b in bodies) - DAY
    assert_top_exact(client, bodies, 10, window="40d")
    assert_top_exact(client, bodies, 3, prefix="https://blog.example/", window="40d")
    assert_top_exact(client, bodies, 10, prefix="https://blog.example/", window="40d")
    for _ in range(4):
        start, end = sorted(rng.randrange(low, clock.now) for _ in range(2))
        limit = rng.choice([1, 3, 8])
        assert_top_exact(client, bodies, limit, rng.choice([None, "https://shop.example/"]), start=start, end=end)


@pytest.mark.parametrize("path", ["log", "bases"])
def test_given_handler_dies_while_updating_the_summaries_when_redelivered_then_top_exact(
    client: Any, aws: Any, clock: Any, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    rng = random.Random(7)
    bodies = views_over(rng, clock.now, urls=25, n=200, days=3)
    post_all(client, bodies)
    messages = receive_all(aws)
    if path == "bases":  # a batch whose log would cost more than its bases writes the bases
        monkeypatch.setattr(top_store, "_base_units", lambda *_: 0)
    name = "_put_log" if path == "log" else "_put"
    real = getattr(top_store, name)
    puts: list[int] = []

    def dies_on_the_third_put(*args: Any) -> Any:
        puts.append(1)
        if len(puts) == 3:
            raise Killed("Lambda timed out")
        return real(*args)

    monkeypatch.setattr(top_store, name, dies_on_the_third_put)
    with pytest.raises(Killed):
        for start in range(0, len(messages), 50):  # a log per batch and block
            deliver(client, messages[start : start + 50])
    monkeypatch.setattr(top_store, name, real)
    again = deliver(client, messages)  # the summaries are made from what is read, duplicates included
    assert again["counted"] < len(messages) and again["top_writes"] > 0
    for window in ("1h", "6h", "2d", "4d"):
        assert_top_exact(client, bodies, 5, window=window)
    assert deliver(client, messages).get("top_writes", 0) == 0, "summaries in place: reads only"


def test_given_handler_dies_before_the_summaries_when_redelivered_in_parts_then_top_exact(
    client: Any, aws: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(8)
    bodies = views_over(rng, clock.now, urls=12, n=120, days=2)
    post_all(client, bodies)
    messages = receive_all(aws)
    monkeypatch.setattr(top_store, "record", _dies)
    with pytest.raises(Killed):
        deliver(client, messages)
    monkeypatch.undo()
    rng.shuffle(messages)
    for part in (messages[:50], messages[50:]):
        deliver(client, part)
    assert_top_exact(client, bodies, 4, window="3d")


def _dies(*_: Any) -> Any:
    raise Killed("Lambda timed out")


@pytest.mark.parametrize("path", ["log", "bases"])
def test_given_two_handlers_racing_on_one_summary_when_applied_then_both_kept(
    client: Any, aws: Any, clock: Any, monkeypatch: pytest.MonkeyPatch, slept: list[float], path: str
) -> None:
    first = [{"url": f"https://a.example/{i}", "time": clock.now - i * 1000, "clientId": "c"} for i in range(6)]
    second = [{"url": f"https://b.example/{i}", "time": clock.now - i * 1000, "clientId": "c"} for i in range(4)]
    post_all(client, first)
    first_messages = receive_all(aws)
    post_all(client, second)
    second_messages = receive_all(aws)
    if path == "bases":
        monkeypatch.setattr(top_store, "_base_units", lambda *_: 0)
    name = "_put_log" if path == "log" else "_put"
    real = getattr(top_store, name)
    raced: list[int] = []

    def the_other_handler_writes_first(*args: Any) -> Any:
        if not raced:
            raced.append(1)
            deliver(client, second_messages)  # commits its summaries between our read and our write
        return real(*args)

    monkeypatch.setattr(top_store, name, the_other_handler_writes_first)
    deliver(client, first_messages)
    monkeypatch.setattr(top_store, name, real)
    if path == "bases":
        assert slept, "the handler that lost the race on a base read it again and retried"
    else:
        logs = [i for i in summary_items(aws) if i["sk"]["S"].startswith(top_store.LOG_PREFIX)]
        assert len(logs) == 2, "two logs of one epoch: neither handler waits for the other"
    assert_top_exact(client, first + second, 20, window="1h")


def test_given_more_urls_than_a_summary_holds_when_read_then_counts_exact_and_the_bound_honest(
    client: Any, aws: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(top, "CAPACITY", 6)
    rng = random.Random(3)
    bodies = views_over(rng, clock.now, urls=30, n=250, days=3)
    post_all(client, bodies)
    messages = receive_all(aws)
    for start in range(0, len(messages), 100):
        deliver(client, messages[start : start + 100])
    exact_seen = 0
    for window, limit in (("1h", 3), ("12h", 3), ("3d", 1), ("3d", 5), ("4d", 20)):
        answer = top_answer(client, window=window, limit=limit)
        truth = brute(bodies, iso_ms(answer["start"]), iso_ms(answer["end"]))
        listed = {row["url"]: row["views"] for row in answer["urls"]}
        assert all(truth[url] == views for url, views in listed.items())
        assert all(views <= answer["bound"] for url, views in truth.items() if url not in listed), window
        ranked = sorted(truth.values(), reverse=True)
        if answer["exact"]:
            exact_seen += 1
            assert sorted(listed.values(), reverse=True) == ranked[:limit]
        assert answer["others"]["views"] <= sum(truth.values()) - sum(listed.values())
    assert exact_seen >= 1, "heavy hitters above every bucket's floor are still ranked exactly"
    assert top_answer(client, window="4d", limit=40)["exact"] is False


def test_given_a_400_day_window_when_read_then_a_bounded_number_of_keys(client: Any, aws: Any, clock: Any) -> None:
    bodies = views_over(random.Random(1), clock.now, urls=30, n=100, days=2)
    post_all(client, bodies)
    deliver(client, receive_all(aws))
    for limit in (1, 10, 100):
        answer = top_answer(client, window="400d", limit=limit)
        assert answer["keys_read"] <= top.MAX_SPANS + 2 * top.MAX_BLOCKS + (limit + top.EXTRA_EXAMINED) * 21
    assert top_answer(client, window="400d", limit=100)["keys_read"] <= top.MAX_SPANS + 2 * top.MAX_BLOCKS + 30 * 21


@pytest.mark.parametrize(
    "params",
    [{"limit": "0"}, {"limit": "1001"}, {"limit": "x"}, {"prefix": " "}, {"window": "401d"}, {"start": "nope"}],
)
def test_given_bad_parameters_when_top_read_then_400(client: Any, clock: Any, params: dict[str, str]) -> None:
    response = client.http.get("/views/top?" + urlencode(params))
    assert response.status_code == 400, response.body
    assert set(response.json_body) == {"Code", "Message"}


def test_given_no_views_when_top_read_then_empty_and_exact(client: Any, clock: Any) -> None:
    answer = top_answer(client)
    assert answer["urls"] == [] and answer["exact"] is True and answer["bound"] == 0
    assert answer["others"] == {"urls": 0, "views": 0, "complete": True}


def summary_items(aws: Any) -> list[dict[str, Any]]:
    from tests.functional.helpers import SETTINGS

    items = aws.dynamodb.scan(TableName=SETTINGS.counts_table)["Items"]
    return [i for i in items if i["pk"]["S"].startswith("VTOP#")]


def test_given_small_batches_when_counted_then_one_log_item_each_folded_in_and_top_exact(
    client: Any, aws: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(top_store, "FOLD_LOGS", 3)
    rng = random.Random(21)
    bodies = views_over(rng, clock.now, urls=20, n=200, days=2)
    post_all(client, bodies)
    messages = receive_all(aws)
    rng.shuffle(messages)
    batches = [messages[i : i + 10] for i in range(0, len(messages), 10)]
    logs: list[int] = []
    real = top_store._put_log
    monkeypatch.setattr(top_store, "_put_log", lambda *args: logs.append(1) or real(*args))
    written = [deliver(client, batch).get("top_writes", 0) for batch in batches]
    assert len(logs) > len(batches) // 2, "small batches write a log item, not each bucket's summary"
    # The layout before logs wrote one item per bucket a batch's views fall in (hours, days, blocks).
    buckets = [
        len({(level, json.loads(m["Body"])["time"] // ms) for m in batch for level, ms in SIZES}) for batch in batches
    ]
    # A fold writes its log's mark twice (closing, then folded: core/log_fold.py); folding every 3
    # logs, as here, that is 188 writes where the per-bucket layout wrote 247. At the default
    # (FOLD_LOGS, 64) the marks are a small share: bench.top_views.
    assert sum(written) < 0.8 * sum(buckets), (sum(written), sum(buckets))
    stored = summary_items(aws)
    assert any(i["sk"]["S"] == top_store.HEAD_SK and "folded" in i for i in stored), "logs were folded"
    for window, limit in (("1h", 3), ("5h", 5), ("1d", 1), ("2d", 8), ("3d", 30)):
        assert_top_exact(client, bodies, limit, window=window)
    assert_top_exact(client, bodies, 4, prefix="https://shop.example/", window="3d")
    for batch in batches[:5]:
        again = deliver(client, batch)
        assert again["counted"] == 0 and again.get("top_writes", 0) == 0, "a redelivered batch writes nothing"
    assert_top_exact(client, bodies, 30, window="3d")


class StaleBases(Forwarding):
    """Eventually consistent reads that return summary bases as they were before the latest
    folds (DynamoDB allows it: such a read "might not reflect the results of a recently
    completed write"), while every other item, the epochs among them, is current."""

    def __init__(self, real: Any, before: dict[tuple[str, str], dict[str, Any]]) -> None:
        super().__init__(real)
        self.before, self.served = before, 0

    def batch_get_item(self, **request: Any) -> Any:
        response = self.real.batch_get_item(**request)
        for table, items in response.get("Responses", {}).items():
            if request["RequestItems"][table].get("ConsistentRead"):
                continue
            kept = []
            for item in items:
                key = (item["pk"]["S"], item["sk"]["S"])
                if item["pk"]["S"].startswith("VTOP#") and item["sk"]["S"] == top_store.SUMMARY_SK:
                    self.served += 1
                    if key in self.before:
                        kept.append(self.before[key])
                    continue
                kept.append(item)
            response["Responses"][table] = kept
        return response


def test_given_bases_read_before_a_fold_and_its_mark_after_when_top_read_then_still_exact(
    client: Any, aws: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read must not pair a block's moved mark with bases older than the fold that moved it:
    the logs that fold observed would then be in neither."""
    monkeypatch.setattr(top_store, "FOLD_LOGS", 3)
    rng = random.Random(5)
    bodies = views_over(rng, clock.now, urls=12, n=120, days=1)
    post_all(client, bodies)
    messages = receive_all(aws)
    batches = [messages[i : i + 6] for i in range(0, len(messages), 6)]
    for batch in batches[:10]:
        deliver(client, batch)
    before = {(i["pk"]["S"], i["sk"]["S"]): i for i in summary_items(aws) if i["sk"]["S"] == top_store.SUMMARY_SK}
    heads = {i["pk"]["S"]: i["folded"]["S"] for i in summary_items(aws) if i["sk"]["S"] == top_store.HEAD_SK}
    for batch in batches[10:]:
        deliver(client, batch)
    moved = {i["pk"]["S"]: i["folded"]["S"] for i in summary_items(aws) if i["sk"]["S"] == top_store.HEAD_SK}
    assert moved != heads, "folds moved a mark after the bases were taken"
    stale = StaleBases(aws.dynamodb, before)
    monkeypatch.setattr(aws, "dynamodb", stale)
    for window, limit in (("1d", 5), ("2d", 12)):
        assert_top_exact(client, bodies, limit, window=window)


def test_given_a_log_written_after_a_fold_closed_the_log_past_it_then_written_again_past_the_mark_and_top_exact(
    client: Any, aws: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.functional.helpers import SETTINGS

    first = [{"url": f"https://a.example/{i}", "time": clock.now - i * 1000, "clientId": "c"} for i in range(30)]
    post_all(client, first)
    deliver(client, receive_all(aws))  # the bases exist: a small batch then writes a log
    second = [
        {"url": f"https://b.example/{i % 3}", "time": clock.now - i * 1000, "clientId": f"d{i}"} for i in range(6)
    ]
    post_all(client, second)
    second_messages = receive_all(aws)
    third = [{"url": f"https://c.example/{i % 2}", "time": clock.now - i * 1000, "clientId": f"e{i}"} for i in range(4)]
    post_all(client, third)
    third_messages = receive_all(aws)
    real = top_store._put_log
    folds: list[int] = []

    def another_handler_logs_and_a_fold_closes_first(dynamodb: Any, log: Any, item: Any, now_ms: int) -> Any:
        if not folds:  # between this handler's reads and its log: another's log, and a fold past both
            folds.append(0)
            deliver(client, third_messages)
            block = top.block_of(timebuckets.Bucket("hour", clock.now // HOUR))
            folds.append(top_store.fold(dynamodb, SETTINGS, block, clock.now))
        return real(dynamodb, log, item, now_ms)

    monkeypatch.setattr(top_store, "_put_log", another_handler_logs_and_a_fold_closes_first)
    deliver(client, second_messages)
    monkeypatch.setattr(top_store, "_put_log", real)
    past = f"{top_store.LOG_PREFIX}{clock.now + 1:013d}#"
    again = [i for i in summary_items(aws) if i["sk"]["S"].startswith(past)]
    assert folds[1] > 0 and len(again) == 1, "the fold closed the log past this one's item: written again past it"
    assert_top_exact(client, first + second + third, 40, window="1h")
    assert top_store.fold(
        aws.dynamodb, SETTINGS, top.block_of(timebuckets.Bucket("hour", clock.now // HOUR)), clock.now + 1
    )
    assert_top_exact(client, first + second + third, 40, window="1h")


def test_given_handler_dies_after_its_log_when_redelivered_then_top_exact_and_nothing_more_written(
    client: Any, aws: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(5)
    bodies = views_over(rng, clock.now, urls=10, n=60, days=1)
    post_all(client, bodies)
    messages = receive_all(aws)
    deliver(client, messages[:40])
    real = top_store._put_log

    def dies_after_writing(*args: Any) -> None:
        real(*args)
        raise Killed("Lambda timed out")

    monkeypatch.setattr(top_store, "_put_log", dies_after_writing)
    with pytest.raises(Killed):
        deliver(client, messages[40:])
    monkeypatch.setattr(top_store, "_put_log", real)
    deliver(client, messages[40:])
    assert_top_exact(client, bodies, 10, window="2d")
    assert deliver(client, messages).get("top_writes", 0) == 0


def test_given_folds_at_random_moments_between_a_handlers_reads_and_writes_when_counted_then_top_exact(
    client: Any, aws: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Other handlers' folds come anywhere between this one's reads of a log's mark, its log
    Query and its log write (the worst case for a log in flight)."""
    from tests.functional.helpers import SETTINGS

    rng = random.Random(11)
    bodies = views_over(rng, clock.now, urls=12, n=150, days=1)
    post_all(client, bodies)
    messages = receive_all(aws)
    real_mark, real_log = log_fold.Log.read_mark, top_store._put_log
    folds: list[int] = []
    inside: list[int] = []

    def maybe_fold(dynamodb: Any) -> None:
        if not inside and rng.random() < 0.3:
            inside.append(1)  # the other handler's own reads and writes come as they are
            for block in sorted({top.block_of(timebuckets.Bucket("hour", b["time"] // HOUR)) for b in bodies}):
                folds.append(top_store.fold(dynamodb, SETTINGS, block, clock.now + len(folds)))
            inside.clear()

    def read_mark(log: Any, dynamodb: Any) -> Any:
        maybe_fold(dynamodb)
        return real_mark(log, dynamodb)

    def put_log(dynamodb: Any, log: Any, item: Any, now_ms: int) -> Any:
        maybe_fold(dynamodb)
        return real_log(dynamodb, log, item, now_ms)

    monkeypatch.setattr(log_fold.Log, "read_mark", read_mark)
    monkeypatch.setattr(top_store, "_put_log", put_log)
    for start in range(0, len(messages), 10):
        deliver(client, messages[start : start + 10])
    monkeypatch.setattr(log_fold.Log, "read_mark", real_mark)
    monkeypatch.setattr(top_store, "_put_log", real_log)
    assert len(folds) > 10 and sum(1 for f in folds if f) > 3, "folds came between reads and writes"
    for window, limit in (("1h", 3), ("6h", 4), ("1d", 12), ("2d", 20)):
        assert_top_exact(client, bodies, limit, window=window)


def test_given_a_batch_whose_log_would_pass_the_item_cap_when_counted_then_its_bases_are_written(
    client: Any, aws: Any, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(top, "MAX_ITEM_BYTES", 300)  # a log of more than a few snapshots passes it
    bodies = views_over(random.Random(9), clock.now, urls=30, n=80, days=1)
    post_all(client, bodies)
    deliver(client, receive_all(aws))
    stored = summary_items(aws)
    assert stored and not [i for i in stored if i["sk"]["S"].startswith(top_store.LOG_PREFIX)]
    assert_top_exact(client, bodies, 30, window="2d")
