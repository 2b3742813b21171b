"""Make moto's TransactWriteItems cost what the transaction touches, not the table size.

moto backs up a whole table (deepcopy) once per item of every transaction so it can roll
back; with thousands of items that makes local runs and benchmarks quadratic. This keeps
moto's behaviour (all or nothing, same errors) but snapshots only the items the transaction
names and restores those on failure. Used by the local stack, the tests and the benchmarks;
never deployed.
"""

from __future__ import annotations

import copy
from typing import Any

_INSTALLED = False


def install() -> None:
    global _INSTALLED
    if _INSTALLED:
        return
    import moto.dynamodb.models as models
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    class _CopyExceptTables:
        """Stands in for the `copy` module inside moto's backend: tables are not copied."""

        @staticmethod
        def deepcopy(value: Any, memo: Any = None) -> Any:
            return value if isinstance(value, Table) else copy.deepcopy(value, memo)

    original = DynamoDBBackend.transact_write_items

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        snapshots = []
        for entry in transact_items:
            for op_type, op in entry.items():
                table = self.tables.get(op.get("TableName"))
                key = op.get("Item") if op_type == "Put" else op.get("Key")
                if table is None or not key or table.hash_key_attr not in key:
                    continue
                hash_value = DynamoType(key[table.hash_key_attr])
                range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr in key else None
                if table.range_key_attr and range_value is None:
                    continue
                current = table.get_item(hash_value, range_value)
                snapshots.append((table, hash_value, range_value, copy.deepcopy(current)))
        try:
            original(self, transact_items)
        except Exception:
            for table, hash_value, range_value, before in reversed(snapshots):
                _restore(table, hash_value, range_value, before)
            raise

    models.copy = _CopyExceptTables  # type: ignore[assignment]
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    _INSTALLED = True


def _restore(table: Any, hash_value: Any, range_value: Any, before: Any) -> None:
    if range_value is None:
        if before is None:
            table.items.pop(hash_value, None)
        else:
            table.items[hash_value] = before
        return
    partition = table.items[hash_value]
    if before is None:
        partition.pop(range_value, None)
        if not partition:
            table.items.pop(hash_value, None)
    else:
        partition[range_value] = before
