"""Log and fold, the one protocol of the catalogs (core.catalog) and the top-URL summaries (views.top_store):
docs/design.md, "Log and fold"; docs/guarantees.md, "Listings: log items, the fold's mark and pages"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chalicelib.core import attributes, dynamo
from chalicelib.core.aws import DynamoDB
from chalicelib.core.storage_errors import translated


@dataclass(frozen=True)
class Mark:
    """How far a fold has closed the log (read it, or is reading it, up to `closing`) and merged
    it (up to `folded`); None: not yet."""

    closing: str | None
    folded: str | None


@dataclass(frozen=True)
class Log:
    """One log: its items alone in partition `pk`, sort keys `<prefix><epoch ms, 13 digits>#<name>`;
    its mark at `mark_key`, expiring at `expires_at` (epoch s; None: never)."""

    table: str
    pk: str
    mark_key: dict[str, Any]
    what: str
    prefix: str = ""
    expires_at: int | None = None

    def sort_key(self, at_ms: int, name: str) -> str:
        return f"{self.prefix}{at_ms:013d}#{name}"

    def time_of(self, sort_key: str) -> int:
        """The epoch ms a log sort key (or `closing`) was made at."""
        return int(sort_key.removeprefix(self.prefix).split("#")[0])

    def read_mark(self, dynamodb: DynamoDB) -> Mark:
        """The mark, strongly consistent."""
        item = dynamo.get_item(dynamodb, self.table, self.mark_key, f"could not read {self.what}") or {}
        return Mark(attributes.optional_text(item, "closing"), attributes.optional_text(item, "folded"))

    def append(self, dynamodb: DynamoDB, item: dict[str, Any], now_ms: int, name: str) -> tuple[int, str]:
        """Write a log item (`item`: its attributes but the key) named `name` at now, again past
        `closing` while a fold closed past it: the writes made and the sort key written last."""
        at_ms, writes = now_ms, 0
        while True:
            sk = self.sort_key(at_ms, name)
            with translated(f"could not write {self.what}"):
                dynamodb.put_item(TableName=self.table, Item={**item, "pk": {"S": self.pk}, "sk": {"S": sk}})
            writes += 1
            closing = self.read_mark(dynamodb).closing
            if closing is None or sk > closing:
                return writes, sk
            at_ms = max(at_ms, self.time_of(closing)) + 1

    def after(self, dynamodb: DynamoDB, after: str | None, most: int | None = None) -> list[dict[str, Any]]:
        """The log items after sort key `after` (None: all), the first `most`, strongly consistent."""
        sk, values = ("", {}) if after is None else ("sk > :after", {":after": after})
        request = dynamo.query_request(self.table, self.pk, sk=sk, values=values, consistent=True)
        return dynamo.query_items(dynamodb, request, f"could not read {self.what}", most)

    def unfolded(self, dynamodb: DynamoDB) -> list[dict[str, Any]]:
        """What a reader reads: the mark first, then the items past `folded` (the fold's order reversed)."""
        return self.after(dynamodb, self.read_mark(dynamodb).folded)

    def close(self, dynamodb: DynamoDB, now_ms: int, most: int | None = None) -> list[dict[str, Any]]:
        """A fold's first step: move `closing` to now, then read the log items to merge (past
        `folded`, the first `most`); nothing to merge: nothing written."""
        closing = self.sort_key(now_ms, "~")
        folded = self.read_mark(dynamodb).folded
        if not any(attributes.sort_key(i) <= closing for i in self.after(dynamodb, folded, 1)):
            return []
        self._move(dynamodb, "closing", closing)
        return [i for i in self.after(dynamodb, folded, most) if attributes.sort_key(i) <= closing]

    def folded(self, dynamodb: DynamoDB, logs: list[dict[str, Any]]) -> None:
        """A fold's last step, once what `logs` hold is merged and stored: move `folded` past them."""
        self._move(dynamodb, "folded", max(attributes.sort_key(i) for i in logs))

    def _move(self, dynamodb: DynamoDB, name: str, to: str) -> None:
        """Move the mark's `name` forward to `to`, never back (two folds at once)."""
        dynamo.move_forward(
            dynamodb, self.table, self.mark_key, name, {"S": to}, self.expires_at, f"could not mark {self.what}"
        )
