"""Assertion: a check the runtime evaluates itself on the live Page. A model's claim is never evidence.

Flat and recursive (`all_of`/`any_of` take `of`), like Action, to keep the schema small and the errors precise.
Bounded like every argument (docs/mcp.md, "Limits"): each `of` holds at most MAX_OF parts, nesting stops at
MAX_DEPTH levels and a whole assertion at MAX_PARTS checks, because each check costs reads of the live Page.
Patterns are RE2 (linear time in the text matched): a model-supplied pattern cannot freeze the server the way a
backtracking engine can on `(a+)+$`.
"""

from __future__ import annotations

from typing import Annotated, Literal

import re2
from pydantic import BaseModel, ConfigDict, Field, model_validator

from runtime.models.action import MAX_TEXT, Short

MAX_PATTERN = 512
MAX_ASSERTED_TEXT = 2000
MAX_NAME = 1000
MAX_OF = 10
MAX_DEPTH = 4
"""Levels of nesting, the outermost assertion included."""
MAX_PARTS = 32
"""Assertions in one verify, every `all_of`/`any_of` and every leaf counted."""

AssertionType = Literal[
    "url_matches", "title_matches", "text_present", "text_absent", "element_state", "element_count", "all_of", "any_of"
]


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # RE2 logs every rejected pattern to stderr; the caller gets the error instead
    return options


OPTIONS = _options()


def compile_pattern(pattern: str) -> re2._Regexp:
    """Compile with RE2, or raise ValueError saying why (RE2 has no backreferences or lookaround)."""
    try:
        return re2.compile(pattern, OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(
            f"pattern is not a valid regular expression: {reason} (RE2 syntax: no backreferences or lookaround)"
        ) from None
    except UnicodeEncodeError:
        raise ValueError("pattern is not valid Unicode (a lone surrogate)") from None


class Assertion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: AssertionType = Field(
        description="*_matches: pattern; text_*: text; element_state: state; element_count: role, name, count; "
        "all_of, any_of: of."
    )
    pattern: str | None = Field(None, max_length=MAX_PATTERN, description="RE2 regex (search).")
    text: str | None = Field(None, max_length=MAX_ASSERTED_TEXT, description="A substring of the Page's text.")
    ref: Short | None = Field(None, description="element_state: a ref, or role+name.")
    role: Short | None = Field(None, description="A role as observe shows it.")
    name: str | None = Field(None, max_length=MAX_NAME, description="Exact accessible name.")
    state: Literal["value", "checked", "visible", "enabled"] | None = Field(
        None, description="element_state: compared with expected."
    )
    expected: Annotated[str, Field(max_length=MAX_TEXT)] | bool | None = Field(
        None, description="A string for value, else true/false."
    )
    count: int | None = Field(None, ge=0, description="element_count: exactly this many.")
    of: list[Assertion] | None = Field(None, max_length=MAX_OF, description="Sub-assertions.")

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
            compile_pattern(self.pattern)
        if self.type in ("all_of", "any_of") and not self.of:
            raise ValueError(f"{self.type} needs a non-empty list in `of`: an empty assertion proves nothing")
        depth, parts = self.extent()
        if depth > MAX_DEPTH:
            raise ValueError(f"assertions nest at most {MAX_DEPTH} levels deep")
        if parts > MAX_PARTS:
            raise ValueError(f"one verify checks at most {MAX_PARTS} assertions (all_of/any_of included)")
        if self.type in ("text_present", "text_absent") and not (self.text or "").strip():
            raise ValueError(f"{self.type} needs non-empty text: an empty assertion proves nothing")
        if self.type == "element_state" and self.ref is None and (self.role is None or self.name is None):
            raise ValueError("element_state needs ref, or role and name")
        if self.type == "element_state" and self.state == "value" and not isinstance(self.expected, str):
            raise ValueError("element_state with state=value needs expected as a string")
        if self.type == "element_state" and self.state != "value" and not isinstance(self.expected, bool):
            raise ValueError(f"element_state with state={self.state} needs expected as true or false")
        return self

    def extent(self) -> tuple[int, int]:
        """(levels of nesting, assertions in all). Parts were validated first, so each is already bounded."""
        depth, parts = 1, 1
        for part in self.of or []:
            part_depth, part_parts = part.extent()
            depth, parts = max(depth, part_depth + 1), parts + part_parts
        return depth, parts
