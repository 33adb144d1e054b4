"""Schema evolution of a typed table: whether the rows of a new schema fit the table's columns after a
change Iceberg allows, and the columns after it. Sans IO; the writer applies the result
(``update_schema().union_by_name``) in the same commit as the rows.

Iceberg's allowed changes, which are the ones made here:
- a column the table lacks is added, nullable (rows written before it read null);
- int32 widens to int64, float32 to float64, and a decimal to a larger precision of the same scale;
- a required column becomes nullable, when the new schema allows null there or lacks the column.

Structs, lists and maps are merged field by field, element and value; a map's key type must be the same.
Anything else (a string column that would hold integers, a narrower type, a struct becoming a list) is
refused with the column and the reason, and the writer sends those rows to the dead-letter table; the
table's columns never change in a way that would make its earlier rows unreadable.

Columns are matched by name, as ``union_by_name`` does; a renamed field is therefore a new column.
"""

from __future__ import annotations

import pyarrow as pa

_WIDER: dict[pa.DataType, pa.DataType] = {pa.int32(): pa.int64(), pa.float32(): pa.float64()}


class Incompatible(ValueError):
    """The new schema's rows cannot join the table: the message names the column and the change."""


def merge(table: pa.Schema, incoming: pa.Schema) -> pa.Schema:
    """The table's columns after taking rows of ``incoming``: ``table`` itself when nothing changes."""
    fields = _merge_fields(list(table), list(incoming), "")
    merged = pa.schema(fields, metadata=table.metadata)
    return table if merged.equals(table) else merged


def _merge_fields(current: list[pa.Field], incoming: list[pa.Field], path: str) -> list[pa.Field]:
    by_name = {f.name: f for f in incoming}
    out: list[pa.Field] = []
    for old in current:
        new = by_name.pop(old.name, None)
        if new is None:
            # Rows of the new schema have no value here.
            out.append(old.with_nullable(True))
            continue
        out.append(_merge_field(old, new, f"{path}{old.name}"))
    # Columns the table lacks, in the new schema's order.
    out.extend(f.with_nullable(True) for f in incoming if f.name in by_name)
    return out


def _merge_field(old: pa.Field, new: pa.Field, path: str) -> pa.Field:
    merged_type = _merge_type(old.type, new.type, path)
    return pa.field(old.name, merged_type, nullable=old.nullable or new.nullable, metadata=old.metadata)


def _merge_type(old: pa.DataType, new: pa.DataType, path: str) -> pa.DataType:
    if old.equals(new):
        return old
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        fields = _merge_fields(
            [old.field(i) for i in range(old.num_fields)],
            [new.field(i) for i in range(new.num_fields)],
            f"{path}.",
        )
        return pa.struct(fields)
    if pa.types.is_list(old) and pa.types.is_list(new):
        return pa.list_(_merge_field(old.value_field, new.value_field, f"{path}[]"))
    if pa.types.is_map(old) and pa.types.is_map(new):
        if not old.key_type.equals(new.key_type):
            raise Incompatible(f"{path}: map keys of type {new.key_type} where the table has {old.key_type}")
        return pa.map_(old.key_type, _merge_field(old.item_field, new.item_field, f"{path}{{}}"))
    if _WIDER.get(old) == new:
        return new
    if old in _WIDER.values() and _WIDER.get(new) == old:
        return old  # a narrower value fits the wider column as it is
    if pa.types.is_decimal(old) and pa.types.is_decimal(new) and old.scale == new.scale:
        return old if old.precision >= new.precision else new
    raise Incompatible(f"{path}: values of type {new} where the table has {old}")
