"""The batch processor (core.batch_processor) with a capability kept in memory: what becomes of
each record, decided once for every background handler."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core import batch_processor
from chalicelib.core.batch_processor import BatchIncompleteError, Outcome, Poison, Sent, Write
from chalicelib.core.errors import RejectedError, StorageError, ValidationError


class Sink:
    def __init__(self, fails: bool = False) -> None:
        self.put_aside: list[tuple[str, str]] = []
        self.fails = fails

    def record_id(self, raw: str) -> str:
        return raw

    def put(self, poison: Sequence[Poison[str]]) -> Counter[str]:
        if self.fails:
            raise StorageError("the sink is down")
        self.put_aside += [(p.raw, str(p.exception)) for p in poison]
        return Counter(set_aside_here=len(poison))


class Numbers(batch_processor.Capability[str, int]):
    """Raw records are texts of numbers; the writes hold `per_write` numbers each; DynamoDB
    "refuses" the numbers in `refused`, "applied before" those in `before`; `broken` writes fail
    for no record's fault."""

    def __init__(
        self,
        per_write: int = 4,
        refused: frozenset[int] = frozenset(),
        before: frozenset[int] = frozenset(),
        broken: frozenset[int] = frozenset(),
        partial: bool = False,
        sink: Sink | None = None,
    ) -> None:
        self.per_write, self.refused, self.before, self.broken = per_write, refused, before, broken
        self.partial = partial
        self._sink = sink or Sink()
        self.stored: list[int] = []
        self.sends: list[list[int]] = []
        self.acknowledged: list[str] | None = None
        self.followed: list[int] = []

    @property
    def sink(self) -> Sink:
        return self._sink

    def parse(self, raw: str) -> list[int]:
        if raw == "skip":
            return []
        if not raw.isdigit():
            raise ValidationError(f"{raw!r} is not a number")
        return [int(raw)]

    def key(self, record: int) -> int:
        return record

    def writes(self, records: list[int]) -> list[Write[int]]:
        return [Write(records[i : i + self.per_write], self.send) for i in range(0, len(records), self.per_write)]

    def send(self, members: list[int]) -> Sent[int]:
        self.sends.append(list(members))
        if self.broken & set(members):
            raise StorageError("storage unavailable")
        if self.refused & set(members):
            raise RejectedError("DynamoDB refused it: ValidationException")
        new = [m for m in members if m not in self.before and m not in self.stored]
        self.stored += new
        return Sent(applied=new, found=[m for m in members if m not in new], calls=1)

    def follow_ups(self, outcome: Outcome[str, int]) -> list[Write[int]]:
        return [Write(outcome.settled(), self.follow)]

    def follow(self, members: list[int]) -> Sent[int]:
        self.followed += members
        return Sent(details=Counter(followed=len(members)))

    def acknowledge(self, done: Sequence[str]) -> None:
        self.acknowledged = list(done)


def test_given_poison_beside_good_records_when_processed_then_each_poison_set_aside_once_with_its_reason() -> None:
    capability = Numbers(per_write=8, refused=frozenset({5}))
    raws = ["1", "2", "x", "3", "4", "5", "6", "skip", "2"]
    result = batch_processor.process(capability, raws)
    assert sorted(capability.stored) == [1, 2, 3, 4, 6]
    assert sorted(capability.sink.put_aside) == [
        ("5", "DynamoDB refused it: ValidationException"),
        ("x", "'x' is not a number"),
    ]
    assert (result.records, result.counted, result.duplicates, result.failed) == (9, 5, 1, 0)
    assert sorted(result.quarantined) == ["5", "x"]
    assert result.details == Counter(skipped=1, set_aside_here=2, followed=5)
    assert sorted(capability.followed) == [1, 2, 3, 4, 6], "follow-ups see what was applied, never the poison"


@given(st.integers(1, 64), st.data())
def test_given_one_refused_record_in_a_write_when_processed_then_halving_finds_it_in_log2_sends(
    size: int, data: st.DataObject
) -> None:
    bad = data.draw(st.integers(0, size - 1))
    capability = Numbers(per_write=size, refused=frozenset({bad}))
    result = batch_processor.process(capability, [str(i) for i in range(size)])
    assert sorted(capability.stored) == [i for i in range(size) if i != bad]
    assert result.quarantined == [str(bad)] and result.counted == size - 1
    assert len(capability.sends) <= 1 + 2 * max(1, size - 1).bit_length()


def test_given_every_record_of_a_write_refused_alone_when_processed_then_the_write_not_a_record_is_at_fault() -> None:
    capability = Numbers(per_write=3, refused=frozenset({0, 1, 2}))
    with pytest.raises(StorageError, match="alike"):
        batch_processor.process(capability, ["0", "1", "2"])
    assert capability.sink.put_aside == []


def test_given_records_applied_before_when_redelivered_then_duplicates_not_counted() -> None:
    capability = Numbers(before=frozenset({1, 3}))
    result = batch_processor.process(capability, ["1", "2", "3", "4"])
    assert (result.counted, result.duplicates, result.transactions) == (2, 2, 1)


def test_given_a_failure_no_record_caused_when_not_partial_then_the_batch_fails_and_nothing_is_set_aside() -> None:
    capability = Numbers(per_write=2, broken=frozenset({3}), refused=frozenset({5}))
    with pytest.raises(StorageError, match="unavailable"):
        batch_processor.process(capability, ["1", "2", "3", "4", "5", "6"])
    assert capability.sink.put_aside == [] and capability.acknowledged is None


def test_given_a_failure_no_record_caused_when_partial_then_the_rest_applied_and_acknowledged_and_the_batch_raises() -> (
    None
):
    capability = Numbers(per_write=2, broken=frozenset({3}), refused=frozenset({5}), partial=True)
    raws = ["1", "2", "3", "4", "5", "6", "x"]
    with pytest.raises(BatchIncompleteError) as raised:
        batch_processor.process(capability, raws)
    assert isinstance(raised.value.__cause__, StorageError), "the failure keeps its exception"
    assert sorted(capability.stored) == [1, 2, 6]
    assert capability.acknowledged == ["1", "2", "5", "6", "x"], "applied and set aside, not the failed write's"


def test_given_the_sink_fails_when_partial_then_the_poison_stays_in_its_source() -> None:
    capability = Numbers(partial=True, sink=Sink(fails=True))
    with pytest.raises(BatchIncompleteError):
        batch_processor.process(capability, ["1", "x", "2"])
    assert capability.acknowledged == ["1", "2"]
