"""Two fixes to moto's DynamoDB, so the emulator behaves like DynamoDB where Tally relies on it.

1. Isolation. moto applies a transaction item by item in the live table and undoes it on
   failure, and its server answers requests on many threads: a concurrent reader could see a
   cancelled transaction's writes, and two conditional writes could both pass their check.
   One lock around every item operation makes each request (and each transaction) atomic,
   and readers get copies of what they read, taken under that lock.
2. Cost. moto backs up a whole table (deepcopy) once per item of every transaction so it can
   roll back, which makes long runs quadratic. Only the items a transaction names are
   snapshotted and restored on failure; the behaviour (all or nothing, same errors) is moto's.
3. Opt-in, `memoize_table_order()`: moto sorts a whole table on every Query and Scan page;
   the order is kept until an item is put or deleted.

Used by the local stack, the tests and the benchmarks; never deployed.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable
from typing import Any

_INSTALLED = False
_LOCK = threading.RLock()
_WRITES = ("put_item", "update_item", "delete_item", "transact_write_items")
# moto hands readers its live item objects and serialises them after the call returns, so a
# reader could still see a later write (or a cancelled transaction) land in them: readers
# get copies taken under the lock.
_READS = ("get_item", "query", "scan")


def _locked(method: Callable[..., Any], copy_result: bool = False) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _LOCK:
            result = method(*args, **kwargs)
            return copy.deepcopy(result) if copy_result else result

    return wrapper


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
    for name in _WRITES:
        setattr(DynamoDBBackend, name, _locked(getattr(DynamoDBBackend, name)))
    for name in _READS:
        setattr(DynamoDBBackend, name, _locked(getattr(DynamoDBBackend, name), copy_result=True))
    _INSTALLED = True


def memoize_table_order() -> None:
    """Sort a table once per change of its item set rather than once per Query or Scan page.

    Only the order moto walks items in is cached, and any put or delete (moto's own or a
    rollback above) drops it, so every answer and every count stays what moto computes.
    """
    from moto.dynamodb.models.table import Table

    if getattr(Table.all_items, "memoized", False):
        return
    original_all_items, original_put, original_delete = Table.all_items, Table.put_item, Table.delete_item

    def all_items(self: Any) -> list[Any]:
        if getattr(self, "_sorted_items", None) is None:
            self._sorted_items = original_all_items(self)
        return list(self._sorted_items)

    def changing(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            self._sorted_items = None
            return method(self, *args, **kwargs)

        return wrapper

    all_items.memoized = True  # type: ignore[attr-defined]
    Table.all_items = all_items  # type: ignore[method-assign]
    Table.put_item = changing(original_put)  # type: ignore[method-assign]
    Table.delete_item = changing(original_delete)  # type: ignore[method-assign]


def _restore(table: Any, hash_value: Any, range_value: Any, before: Any) -> None:
    table._sorted_items = None
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
