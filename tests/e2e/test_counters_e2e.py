"""Windowed counts over real HTTP: a few thousand events spread over 30 hours, every window checked."""

from __future__ import annotations

import random
import re
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from tests.e2e.stack import LocalStack, wait_for

MINUTE = 60_000
HOUR = 60 * MINUTE
COUNTERS = ["e2e.provider-1", "e2e.provider-2", "e2e.provider-3"]


def brute_force(times: list[int], end_ms: int, minutes: int) -> int:
    last = end_ms // MINUTE
    return sum(1 for t in times if last - minutes + 1 <= t // MINUTE <= last)


def post(stack: LocalStack, batch: list[dict[str, Any]]) -> None:
    response = stack.post("/events", json={"events": batch}, timeout=30)
    assert response.status_code == 201, response.text


def test_given_3000_events_over_30_hours_when_posted_over_http_then_every_24h_and_90m_window_exact(
    local_stack: LocalStack,
) -> None:
    rng = random.Random(2026)
    now = int(time.time() * 1000)
    sent: dict[str, list[int]] = {c: [] for c in COUNTERS}
    events = []
    for i in range(3000):
        counter = rng.choice(COUNTERS)
        t = now - rng.randrange(30 * HOUR)
        sent[counter].append(t)
        events.append({"counter": counter, "id": f"e2e-{i}", "time": t, "retention": 7 * 86400})
    batches = [events[i : i + 25] for i in range(0, len(events), 25)]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda b: post(local_stack, b), batches))
    # A client retry of a whole batch must not count twice.
    post(local_stack, batches[0])

    def count(counter: str) -> int:
        return int(local_stack.get(f"/counters/{counter}", params={"window": "31h", "end": now}).json()["count"])

    for counter, times in sent.items():
        wait_for(partial(count, counter), 180, f"{counter} counted ({local_stack.log_path})", len(times).__eq__)

    for counter, times in sent.items():
        for end in range(now - 6 * HOUR, now + 1, 10 * MINUTE):
            body = local_stack.get(f"/counters/{counter}", params={"window": "24h", "end": end}).json()
            assert body["count"] == brute_force(times, end, 1440), (counter, end)
            assert body["keys_read"] <= 27  # 25 buckets and the days of its partial hours
        for end in range(now - 30 * HOUR, now + 1, 30 * MINUTE):
            body = local_stack.get(f"/counters/{counter}", params={"window": "90m", "end": end}).json()
            assert body["count"] == brute_force(times, end, 90), (counter, end)
    assert '"message":"invocation"' in local_stack.log() and '"function":"on_event_records"' in local_stack.log()


def test_given_stream_delivered_as_two_shards_when_events_posted_then_every_count_exact(tmp_path: Any) -> None:
    """One partition key's items through two shards, the later shard first (what an adaptive
    split of a hot partition does on AWS): counting is proven per shard, so nothing is lost."""
    from tests.e2e.stack import running_stack

    rng = random.Random(23)
    now = int(time.time() * 1000)
    sent: dict[str, list[int]] = {c: [] for c in COUNTERS}
    events = []
    for i in range(600):
        counter = rng.choice(COUNTERS)
        t = now - rng.randrange(3 * HOUR)
        sent[counter].append(t)
        # half with a client id (claimed by a marker), half with ids Tally generates
        events.append({"counter": counter, "time": t, **({"id": f"split-{i}"} if i % 2 else {})})
    with running_stack(tmp_path, "--stream-shards", "2") as stack:
        for start in range(0, len(events), 25):
            post(stack, events[start : start + 25])
        retry = [e for e in events[:50] if "id" in e]
        post(stack, retry)  # a client retry: its ids count once
        stack.settled()  # every record handled: a count short or over now is wrong, not late
        for counter, times in sent.items():
            body = stack.get(f"/counters/{counter}", params={"window": "4h", "end": now}).json()
            assert body["count"] == len(times), stack.log()[-3000:]
            for end in range(now - 3 * HOUR, now + 1, 20 * MINUTE):
                window = stack.get(f"/counters/{counter}", params={"window": "90m", "end": end}).json()
                assert window["count"] == brute_force(times, end, 90), (counter, end)
        assert '"function":"on_event_records"' in stack.log()
        assert not re.search(r'"OutOfSequence":[1-9]', stack.log())
