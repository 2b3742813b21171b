"""The one batch processor every background handler runs, given a `Capability`. The steps, and which failure is
poison and which fails the batch: docs/design.md, "Background batches"."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from chalicelib.core.batch_result import BatchResult
from chalicelib.core.errors import RejectedError, StorageError, ValidationError

S = TypeVar("S")  # a raw record as the trigger delivered it
R = TypeVar("R")  # a typed record the capability applies


class BatchIncompleteError(StorageError):
    """Some records of a batch could not be applied; the others were acknowledged."""


@dataclass(frozen=True)
class Sent(Generic[R]):
    """What one write did: the records it applied now, those found applied before, the calls made
    (`retries` after a transient failure), marks the capability reads in `summarize`, details."""

    applied: Sequence[R] = ()
    found: Sequence[R] = ()
    calls: int = 0
    retries: int = 0
    marks: dict[str, Sequence[R]] = field(default_factory=dict)
    details: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class Write(Generic[R]):
    """One planned write and its records: `send(members)` applies it for a subset of them (the
    processor halves a refused write), RejectedError when DynamoDB refuses the data."""

    members: Sequence[R]
    send: Callable[[list[R]], Sent[R]]


@dataclass(frozen=True)
class Poison(Generic[S]):
    """A raw record set aside, with what made it poison."""

    raw: S
    exception: BaseException


class PoisonSink(Protocol[S]):
    """Where a source's poison goes. `put` raises StorageError when it cannot set them aside;
    it returns its own details (say, how many were dead-lettered)."""

    def put(self, poison: Sequence[Poison[S]]) -> Counter[str]: ...

    def record_id(self, raw: S) -> str: ...


@dataclass(frozen=True)
class Outcome(Generic[S, R]):
    """What became of a batch's records, as the follow-ups and `summarize` see it."""

    counted: list[R]  # applied by this delivery
    found: list[R]  # written before by an earlier delivery, found by the writes
    checked: list[R]  # found applied by a check, never written
    unwritten: list[R]  # parsed, but no write carried them (say, every bucket expired)
    poison: list[tuple[Poison[S], R | None]]  # set aside, with the typed record when it parsed
    failed: list[R]  # left for redelivery (partial sources only)
    marks: dict[str, list[R]]

    def settled(self) -> list[R]:
        """Records this delivery applied or found applied, written by the writes."""
        return self.counted + self.found


class Capability(ABC, Generic[S, R]):
    """What one capability supplies to the processor (docs/design.md, "Background batches")."""

    partial: bool = False

    @property
    @abstractmethod
    def sink(self) -> PoisonSink[S]: ...

    @abstractmethod
    def parse(self, raw: S) -> Sequence[R]: ...

    def key(self, record: R) -> Hashable | None:
        """Records of one batch with the same key are one (None: every record is its own)."""
        return None

    def combine(self, kept: R, again: R) -> R:
        return kept

    def checks(self, records: list[R]) -> list[Write[R]]:
        return []

    @abstractmethod
    def writes(self, records: list[R]) -> list[Write[R]]: ...

    def follow_ups(self, outcome: Outcome[S, R]) -> list[Write[R]]:
        return []

    def summarize(self, outcome: Outcome[S, R]) -> Counter[str]:
        return Counter()

    def acknowledge(self, done: Sequence[S]) -> None:
        """Partial sources: remove the raw records that are done from their source."""


@dataclass
class _Run(Generic[S, R]):
    sources: dict[int, list[S]] = field(default_factory=dict)  # typed record -> its raw records
    applied: set[int] = field(default_factory=set)
    found: set[int] = field(default_factory=set)
    checked: set[int] = field(default_factory=set)
    refused: dict[int, BaseException] = field(default_factory=dict)
    failed: dict[int, BaseException] = field(default_factory=dict)
    errors: list[BaseException] = field(default_factory=list)  # why records were left, first first
    marks: dict[str, set[int]] = field(default_factory=dict)
    sent: list[Sent[R]] = field(default_factory=list)


def process(capability: Capability[S, R], raws: Sequence[S]) -> BatchResult:
    """Apply one batch; returns its BatchResult, or raises (see the module's docstring)."""
    run: _Run[S, R] = _Run()
    records, parse_poison, merged, skipped = _parse(capability, raws, run)
    for write in capability.checks(records):
        _apply(capability, write, run, count=False)
    for write in capability.writes([r for r in records if id(r) not in run.checked and _open(run, r)]):
        _apply(capability, write, run, count=True)
    refused: list[tuple[Poison[S], R | None]] = [
        (Poison(raw, run.refused[id(r)]), r) for r in records if id(r) in run.refused for raw in run.sources[id(r)]
    ]
    poison, left, sink_details = _set_aside(capability, parse_poison + refused, run)
    for write in capability.follow_ups(_outcome(run, records, poison)):
        _follow(capability, write, run)
    outcome = _outcome(run, records, poison)

    details: Counter[str] = Counter({"skipped": skipped} if skipped else {})
    for part in [*(sent.details for sent in run.sent), sink_details, capability.summarize(outcome)]:
        details.update(part)
    result = BatchResult(
        records=len(raws),
        counted=len(outcome.counted),
        duplicates=merged + len(outcome.checked) + len(outcome.found),
        quarantined=[capability.sink.record_id(p.raw) for p, _ in poison],
        failed=len(outcome.failed),
        transactions=sum(s.calls for s in run.sent),
        retries=sum(s.retries for s in run.sent),
        details=details,
    )
    if run.errors:
        kept = {id(raw) for r in outcome.failed for raw in run.sources[id(r)]} | {id(raw) for raw in left}
        capability.acknowledge([raw for raw in raws if id(raw) not in kept])
        raise BatchIncompleteError(
            f"{len(kept)} of {len(raws)} records must be retried: {result.as_dict()}"
        ) from run.errors[0]
    return result


def _set_aside(
    capability: Capability[S, R], poison: list[tuple[Poison[S], R | None]], run: _Run[S, R]
) -> tuple[list[tuple[Poison[S], R | None]], list[S], Counter[str]]:
    """Put the batch's poison through the sink: (what was set aside, what stays in its source
    because the sink failed (partial sources), the sink's details)."""
    if not poison:
        return [], [], Counter()
    try:
        return poison, [], capability.sink.put([p for p, _ in poison])
    except Exception as exc:
        if not capability.partial:
            raise
        run.errors.append(exc)
        return [], [p.raw for p, _ in poison], Counter()


def _parse(
    capability: Capability[S, R], raws: Sequence[S], run: _Run[S, R]
) -> tuple[list[R], list[tuple[Poison[S], R | None]], int, int]:
    """Typed records (one per key), the raw records that are poison, how many records were
    merged into one with the same key, and how many raw records were not for this capability."""
    records: list[R] = []
    by_key: dict[Hashable, int] = {}
    poison: list[tuple[Poison[S], R | None]] = []
    merged = skipped = 0
    for raw in raws:
        try:
            parsed = capability.parse(raw)
        except ValidationError as exc:
            poison.append((Poison(raw, exc), None))
            continue
        if not parsed:
            skipped += 1
        for record in parsed:
            key = capability.key(record)
            if key is not None and key in by_key:
                index = by_key[key]
                kept = capability.combine(records[index], record)
                run.sources[id(kept)] = run.sources.pop(id(records[index])) + [raw]
                records[index] = kept
                merged += 1
                continue
            if key is not None:
                by_key[key] = len(records)
            records.append(record)
            run.sources[id(record)] = [raw]
    return records, poison, merged, skipped


def _open(run: _Run[S, R], record: R) -> bool:
    return id(record) not in run.refused and id(record) not in run.failed


def _fail(capability: Capability[S, R], write: Write[R], members: list[R], run: _Run[S, R], exc: Exception) -> None:
    """A failure that is no record's fault: the batch fails, or (partial sources) its records do."""
    if not capability.partial or not write.members:
        raise exc
    for m in members:
        run.failed.setdefault(id(m), exc)
    run.errors.append(exc)


def _apply(capability: Capability[S, R], write: Write[R], run: _Run[S, R], count: bool) -> None:
    """Send one write; a refused one is halved until the record it fails for is alone."""
    members = [m for m in write.members if _open(run, m)]
    if write.members and not members:
        return
    try:
        sents, refused = _isolate(write, members)
        if len(members) > 1 and len(refused) == len(members):
            first = next(iter(refused.values()))
            raise StorageError(f"DynamoDB refused a write for each of its {len(members)} records alike") from first
    except Exception as exc:
        _fail(capability, write, members, run, exc)
        return
    run.refused.update(refused)
    for sent in sents:
        run.sent.append(sent)
        for name, marked in sent.marks.items():
            run.marks.setdefault(name, set()).update(id(m) for m in marked)
        if count:
            run.applied.update(id(m) for m in sent.applied)
            run.found.update(id(m) for m in sent.found)
        else:
            run.checked.update(id(m) for m in sent.found)


def _isolate(write: Write[R], members: list[R]) -> tuple[list[Sent[R]], dict[int, BaseException]]:
    """What the write did for `members`, halving on refusal: (what each send did, refused records)."""
    try:
        return [write.send(members)], {}
    except RejectedError as exc:
        if len(members) <= 1:
            return [], {id(m): exc for m in members}
        half = len(members) // 2
        first, first_refused = _isolate(write, members[:half])
        second, second_refused = _isolate(write, members[half:])
        return first + second, first_refused | second_refused


def _follow(capability: Capability[S, R], write: Write[R], run: _Run[S, R]) -> None:
    """A write derived from what was applied: about no one record, never halved."""
    members = [m for m in write.members if _open(run, m)]
    try:
        sent = write.send(members)
    except Exception as exc:
        _fail(capability, write, members, run, exc)
        return
    run.sent.append(sent)


def _outcome(run: _Run[S, R], records: list[R], poison: list[tuple[Poison[S], R | None]]) -> Outcome[S, R]:
    kept = [r for r in records if id(r) not in run.refused]
    return Outcome(
        counted=[r for r in kept if id(r) in run.applied],
        found=[r for r in kept if id(r) in run.found and id(r) not in run.applied],
        checked=[r for r in kept if id(r) in run.checked],
        unwritten=[r for r in kept if id(r) not in run.applied | run.found | run.checked and id(r) not in run.failed],
        poison=poison,
        failed=[r for r in records if id(r) in run.failed],
        marks={name: [r for r in records if id(r) in ids] for name, ids in run.marks.items()},
    )
