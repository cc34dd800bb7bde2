"""Compact JSON schemas for `tools/list`: the tool's schema is paid for in every model request.

Pydantic's schemas carry a `title` on every property and spell an optional field as `anyOf: [X, null]` with
`default: null`. Neither tells a model anything the property name and `required` do not, so both go (from a
union of several types too: `anyOf: [X, Y, null]` becomes `anyOf: [X, Y]`).
"""

from __future__ import annotations

from typing import Any


def compact(schema: Any, keep_descriptions: bool = True) -> Any:
    if isinstance(schema, list):
        return [compact(item, keep_descriptions) for item in schema]
    if not isinstance(schema, dict):
        return schema
    dropped = ("title",) if keep_descriptions else ("title", "description")
    out = {
        key: compact(value, keep_descriptions)
        for key, value in schema.items()
        if key not in dropped or not isinstance(value, str)
    }
    branches = out.get("anyOf")
    if isinstance(branches, list) and out.get("default", 0) is None:
        non_null = [b for b in branches if b != {"type": "null"}]
        if len(non_null) == 1:
            merged = {key: value for key, value in out.items() if key not in ("anyOf", "default")}
            return {**non_null[0], **merged}
        out["anyOf"] = non_null
    if out.get("default", 0) is None:
        del out["default"]
    return out
