"""Fixes to moto's DynamoDB, so the emulator behaves like DynamoDB where Tally relies on it.

1. Isolation. moto applies a transaction item by item in the live table and undoes it on
   failure, and its server answers requests on many threads: a concurrent reader could see a
   cancelled transaction's writes, and two conditional writes could both pass their check.
   One lock around every item operation makes each request (and each transaction) atomic,
   and readers get copies of what they read, taken under that lock.
2. Cost. moto backs up a whole table (deepcopy) once per item of every transaction so it can
   roll back, which makes long runs quadratic. Only the items a transaction names are
   snapshotted and restored on failure; the behaviour (all or nothing, same errors) is moto's.
3. Limits. DynamoDB's documented limits where moto does not enforce them (number precision and
   range, arithmetic in 38 digits, expression lengths, item and key sizes, transaction and batch
   sizes), each refused with the error DynamoDB gives; docs/guarantees.md quotes each limit.
4. Opt-in, `memoize_table_order()`: moto sorts a whole table on every Query and Scan page;
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
        # a cancelled transaction streams nothing: moto streamed each write it applied and undid
        streams = {id(s[0]): (s[0].stream_shard, len(s[0].stream_shard.items)) for s in snapshots if s[0].stream_shard}
        _IN_TRANSACTION.active = True
        try:
            original(self, transact_items)
        except Exception:
            for table, hash_value, range_value, before in reversed(snapshots):
                _restore(table, hash_value, range_value, before)
            for shard, records in streams.values():
                del shard.items[records:]
            raise
        finally:
            _IN_TRANSACTION.active = False

    _install_limits()
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


# --- DynamoDB's documented limits, where moto 5 does not enforce them (docs/guarantees.md,
# "DynamoDB's limits, enforced by the emulator"). The numbers are chalicelib.core.dynamo_limits.
_OVERFLOW = "Number overflow. Attempting to store a number with magnitude larger than supported range"
_UNDERFLOW = "Number underflow. Attempting to store a number with magnitude smaller than supported range"
_DIGITS = "Attempting to store more than 38 significant digits in a Number"
_NUMBER_FAULTS = {"overflow": _OVERFLOW, "underflow": _UNDERFLOW, "digits": _DIGITS}
_EXPRESSIONS = (
    "UpdateExpression",
    "ConditionExpression",
    "ProjectionExpression",
    "FilterExpression",
    "KeyConditionExpression",
)
_IN_TRANSACTION = threading.local()


class ValidationError(Exception):
    """A write whose result DynamoDB cannot store (a number out of range, an item too large).

    Inside TransactWriteItems DynamoDB cancels the transaction with the reason code
    "ValidationError"; moto names a cancellation reason after the exception's class, so this
    class carries that name. Outside a transaction it becomes a ValidationException.
    """


def _refuse(message: str) -> Exception:
    from moto.dynamodb.exceptions import MockValidationException

    return MockValidationException(message)


def _check_number(text: Any) -> None:
    from decimal import Decimal

    from chalicelib.core import dynamo_limits

    if not isinstance(text, str) or not dynamo_limits.NUMBER_TEXT.fullmatch(text):
        return  # moto answers malformed numbers itself
    fault = dynamo_limits.number_fault(Decimal(text))
    if fault:
        raise _refuse(_NUMBER_FAULTS[fault])


def _check_numbers(value: Any) -> None:
    """Every N and NS anywhere in a request: items, keys, expression values, maps, lists."""
    if isinstance(value, dict):
        for kind, body in value.items():
            if kind == "N" and isinstance(body, str):
                _check_number(body)
            elif kind == "NS" and isinstance(body, list) and all(isinstance(n, str) for n in body):
                for number in body:
                    _check_number(number)
            else:
                _check_numbers(body)
    elif isinstance(value, list):
        for element in value:
            _check_numbers(element)


def _check_expressions(request: dict[str, Any]) -> None:
    from chalicelib.core import dynamo_limits
    from chalicelib.core.item_sizes import attribute_size

    for name in _EXPRESSIONS:
        expression = request.get(name)
        if isinstance(expression, str) and len(expression.encode()) > dynamo_limits.EXPRESSION_BYTES:
            raise _refuse(
                f"Invalid {name}: Expression size has exceeded the maximum allowed size; "
                f"expression size: {len(expression.encode())}"
            )
    names = request.get("ExpressionAttributeNames") or {}
    values = request.get("ExpressionAttributeValues") or {}
    for placeholder in [*names, *values]:
        if len(placeholder.encode()) > dynamo_limits.PLACEHOLDER_BYTES:
            raise _refuse(
                "ExpressionAttributeNames and ExpressionAttributeValues keys can be at most "
                f"{dynamo_limits.PLACEHOLDER_BYTES} bytes long: {placeholder[:16]}..."
            )
    substitutions = sum(len(k.encode()) + len(v.encode()) for k, v in names.items()) + sum(
        len(k.encode()) + attribute_size(v) for k, v in values.items()
    )
    if substitutions > dynamo_limits.SUBSTITUTION_BYTES:
        raise _refuse("Expression attribute names and values have exceeded the maximum allowed size of 2 MB")


def _check_key(backend: Any, table_name: Any, key: Any) -> None:
    """Key attributes of any request (moto checks them only in a PutItem's item)."""
    from moto.dynamodb.exceptions import HashKeyTooLong, RangeKeyTooLong

    from chalicelib.core import dynamo_limits
    from chalicelib.core.item_sizes import attribute_size

    table = backend.tables.get(table_name)
    if table is None or not isinstance(key, dict):
        return
    hash_value = key.get(table.hash_key_attr)
    if isinstance(hash_value, dict) and attribute_size(hash_value) > dynamo_limits.PARTITION_KEY_BYTES:
        raise HashKeyTooLong()
    range_value = key.get(table.range_key_attr) if table.range_key_attr else None
    if isinstance(range_value, dict) and attribute_size(range_value) > dynamo_limits.SORT_KEY_BYTES:
        raise RangeKeyTooLong()


def _check_item(backend: Any, table_name: Any, item: Any) -> int:
    """An item to put: its keys and its size by DynamoDB's rules; returns the size."""
    from moto.dynamodb.exceptions import ItemSizeTooLarge

    from chalicelib.core import dynamo_limits
    from chalicelib.core.item_sizes import item_size

    _check_key(backend, table_name, item)
    size = item_size(item)
    if size > dynamo_limits.ITEM_BYTES:
        raise ItemSizeTooLarge()
    return size


def _check_operation(backend: Any, op: dict[str, Any]) -> int:
    """One item operation (alone or in a transaction); returns the bytes it carries."""
    from chalicelib.core.item_sizes import attribute_size, item_size

    _check_expressions(op)
    _check_numbers(op.get("Item"))
    _check_numbers(op.get("Key"))
    _check_numbers(op.get("ExpressionAttributeValues"))
    size = sum(attribute_size(v) for v in (op.get("ExpressionAttributeValues") or {}).values())
    if "Item" in op:
        size += _check_item(backend, op.get("TableName"), op["Item"])
    if "Key" in op:
        _check_key(backend, op.get("TableName"), op["Key"])
        size += item_size(op["Key"])
    return size


def _item_key(backend: Any, table_name: Any, attributes: Any) -> tuple[Any, ...] | None:
    table = backend.tables.get(table_name)
    if table is None or not isinstance(attributes, dict):
        return None
    names = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
    return (table_name, *(repr(attributes.get(name)) for name in names))


def _check_transaction(backend: Any, entries: list[dict[str, Any]]) -> None:
    from moto.dynamodb.exceptions import MultipleTransactionsException

    from chalicelib.core import dynamo_limits

    if len(entries) > dynamo_limits.TRANSACTION_ITEMS:
        raise _refuse(
            f"1 validation error detected: Value at 'transactItems' failed to satisfy constraint: "
            f"Member must have length less than or equal to {dynamo_limits.TRANSACTION_ITEMS}"
        )
    size, seen = 0, set()
    for entry in entries:
        for op in entry.values():
            size += _check_operation(backend, op)
            key = _item_key(backend, op.get("TableName"), op.get("Item", op.get("Key")))
            if key is not None and key in seen:
                raise MultipleTransactionsException()
            seen.add(key)
    if size > dynamo_limits.TRANSACTION_BYTES:
        raise _refuse("Transaction request size has exceeded the maximum allowed size of 4 MB")


def _check_batch_write(backend: Any, request_items: dict[str, list[dict[str, Any]]]) -> None:
    from chalicelib.core import dynamo_limits

    requests = [(table, r) for table, rs in request_items.items() for r in rs]
    if len(requests) > dynamo_limits.BATCH_WRITE_REQUESTS:
        raise _refuse(
            "1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Map value "
            "must satisfy constraint: [Member must have length less than or equal to "
            f"{dynamo_limits.BATCH_WRITE_REQUESTS}, Member must have length greater than or equal to 1]"
        )
    size, seen = 0, set()
    for table, request in requests:
        for op in request.values():
            attributes = op.get("Item", op.get("Key"))
            _check_numbers(attributes)
            if "Item" in op:
                size += _check_item(backend, table, op["Item"])
            else:
                _check_key(backend, table, op.get("Key"))
            key = _item_key(backend, table, attributes)
            if key is not None and key in seen:
                # moto compares puts with puts and deletes with deletes, not a put with a delete
                raise _refuse("Provided list of item keys contains duplicates")
            seen.add(key)
    if size > dynamo_limits.BATCH_WRITE_BYTES:  # unreachable by 25 items of 400 KB; kept as documented
        raise _refuse("Too many items requested for the BatchWriteItem call")


def _check_request(action: str, backend: Any, body: dict[str, Any]) -> None:
    if action in ("put_item", "update_item", "delete_item", "get_item"):
        _check_operation(backend, body)
    elif action in ("query", "scan"):
        _check_expressions(body)
        _check_numbers(body.get("ExpressionAttributeValues"))
    elif action in ("transact_write_items", "transact_get_items"):
        _check_transaction(backend, body.get("TransactItems") or [])
    elif action == "batch_write_item":
        _check_batch_write(backend, body.get("RequestItems") or {})
    elif action == "batch_get_item":
        for table, request in (body.get("RequestItems") or {}).items():
            _check_expressions(request)
            for key in request.get("Keys") or []:
                _check_numbers(key)
                _check_key(backend, table, key)


def _checked(action: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(self: Any) -> Any:
        _check_request(action, self.dynamodb_backend, self.body)
        return method(self)

    return wrapper


def _arithmetic(operation: str) -> Callable[[Any, Any], Any]:
    """`+` and `-` of update expressions (SET a = a + :v, ADD a :v), in DynamoDB's 38 digits.

    moto adds in Python's default 28-digit context (or in unbounded ints) and stores whatever
    comes out. DynamoDB refuses a result it cannot hold exactly: past 38 significant digits (it
    does not round) or out of range.
    """
    from decimal import Context, Decimal, Inexact

    from moto.dynamodb.models.dynamo_type import DDBType, DynamoType

    from chalicelib.core import dynamo_limits

    def apply(self: Any, other: Any) -> Any:
        if self.type != other.type:
            raise TypeError("Different types of operandi is not allowed.")
        if self.type != DDBType.NUMBER:
            from moto.dynamodb.exceptions import IncorrectDataType

            raise IncorrectDataType()
        context = Context(prec=dynamo_limits.NUMBER_DIGITS)
        left, right = Decimal(self.value), Decimal(other.value)
        result = context.add(left, right) if operation == "+" else context.subtract(left, right)
        if context.flags[Inexact]:
            raise ValidationError(_OVERFLOW)  # what DynamoDB answers for a result it would round
        fault = dynamo_limits.number_fault(result)
        if fault:
            raise ValidationError(_NUMBER_FAULTS[fault])
        return DynamoType({DDBType.NUMBER: str(result)})

    return apply


def _sized_update(method: Callable[..., Any]) -> Callable[..., Any]:
    """UpdateItem refused when the item it leaves is over 400 KB (by DynamoDB's sizing rules).

    moto sizes items its own way and cuts at 405,000 bytes; its check is replaced by this one
    (and by the item check of a put above).
    """
    from chalicelib.core import dynamo_limits
    from chalicelib.core.item_sizes import item_size

    @functools.wraps(method)
    def update_item(self: Any, table_name: str, key: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        table = self.get_table(table_name)
        hash_value, range_value = _key_values(table, key)
        before = copy.deepcopy(table.get_item(hash_value, range_value)) if hash_value is not None else None
        records = len(table.stream_shard.items) if table.stream_shard is not None else 0
        try:
            item = method(self, table_name, key, *args, **kwargs)
            if item_size(item.to_json()["Attributes"]) > dynamo_limits.ITEM_BYTES:
                raise ValidationError("Item size to update has exceeded the maximum allowed size")
        except ValidationError as refused:
            # moto has already applied the update and streamed it: neither happened on DynamoDB
            _restore(table, hash_value, range_value, before)
            if table.stream_shard is not None:
                del table.stream_shard.items[records:]
            if getattr(_IN_TRANSACTION, "active", False):
                raise  # the transaction's cancellation reason
            raise _refuse(str(refused)) from None
        return item

    return update_item


def _key_values(table: Any, key: dict[str, Any]) -> tuple[Any, Any]:
    from moto.dynamodb.models.dynamo_type import DynamoType

    if table.hash_key_attr not in key:
        return None, None
    range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr in key else None
    return DynamoType(key[table.hash_key_attr]), range_value


def _install_limits() -> None:
    import moto.dynamodb.responses as responses
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.dynamo_type import DynamoType, LimitedSizeDict
    from moto.dynamodb.responses import DynamoHandler

    from chalicelib.core import dynamo_limits

    for action in (
        "put_item",
        "update_item",
        "delete_item",
        "get_item",
        "query",
        "scan",
        "transact_write_items",
        "transact_get_items",
        "batch_write_item",
        "batch_get_item",
    ):
        setattr(DynamoHandler, action, _checked(action, getattr(DynamoHandler, action)))
    # moto refuses TransactGetItems past 25 actions, DynamoDB's limit before 2022; now 100.
    responses.TRANSACTION_MAX_ITEMS = dynamo_limits.TRANSACTION_ITEMS  # type: ignore[attr-defined]
    DynamoType.__add__ = _arithmetic("+")  # type: ignore[method-assign,assignment]
    DynamoType.__sub__ = _arithmetic("-")  # type: ignore[method-assign,assignment]
    LimitedSizeDict.__setitem__ = dict.__setitem__  # type: ignore[method-assign,assignment]
    DynamoDBBackend.update_item = _sized_update(DynamoDBBackend.update_item)  # type: ignore[method-assign]
