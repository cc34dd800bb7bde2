"""Assertion: a check the runtime evaluates itself on the live Page. A model's claim is never evidence.

Flat and recursive (`all_of`/`any_of` take `of`), like Action, to keep the schema small and the errors precise.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

AssertionType = Literal[
    "url_matches", "title_matches", "text_present", "text_absent", "element_state", "element_count", "all_of", "any_of"
]


class Assertion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: AssertionType
    pattern: str | None = Field(None, description="Regex (search).")
    text: str | None = Field(None, description="Visible text.")
    ref: str | None = Field(None, description="element_state: a ref, or role+name.")
    role: str | None = Field(None, description="ARIA role.")
    name: str | None = Field(None, description="Exact accessible name.")
    state: Literal["value", "checked", "visible", "enabled"] | None = None
    expected: str | bool | None = Field(None, description="A string for value, else true/false.")
    count: int | None = Field(None, ge=0)
    of: list[Assertion] | None = Field(None, description="all_of/any_of: sub-assertions.")

    @model_validator(mode="after")
    def _fields_for_type(self) -> Assertion:
        need: dict[str, tuple[str, ...]] = {
            "url_matches": ("pattern",),
            "title_matches": ("pattern",),
            "text_present": ("text",),
            "text_absent": ("text",),
            "element_state": ("state", "expected"),
            "element_count": ("role", "count"),
            "all_of": ("of",),
            "any_of": ("of",),
        }
        missing = [name for name in need[self.type] if getattr(self, name) is None]
        if missing:
            raise ValueError(f"{self.type} needs {', '.join(missing)}")
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"pattern is not a valid regular expression: {exc}") from None
        if self.type in ("all_of", "any_of") and not self.of:
            raise ValueError(f"{self.type} needs a non-empty list in `of`: an empty assertion proves nothing")
        if self.type in ("text_present", "text_absent") and not (self.text or "").strip():
            raise ValueError(f"{self.type} needs non-empty text: an empty assertion proves nothing")
        if self.type == "element_state" and self.ref is None and (self.role is None or self.name is None):
            raise ValueError("element_state needs ref, or role and name")
        if self.type == "element_state" and self.state == "value" and not isinstance(self.expected, str):
            raise ValueError("element_state with state=value needs expected as a string")
        if self.type == "element_state" and self.state != "value" and not isinstance(self.expected, bool):
            raise ValueError(f"element_state with state={self.state} needs expected as true or false")
        return self
