"""Action: exactly one user-level operation per `act`, addressed by a ref from the latest Frame.

One flat model (not a union) keeps the tool schema small; the validator says precisely which field a given
action type needs, which is what an agent needs to fix its call.

Every string and list is bounded (docs/mcp.md, "Limits"): a model's arguments are untrusted input too, and an
oversized one is refused before any backend call. The limits a model could reach with real content (text, url,
values) are published as `maxLength`/`maxItems`; those on tokens it only copies (refs, ids, keys, roles) are
enforced without being published, because the tool schema is paid for in every model request.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

MAX_SHORT = 64
"""Refs, handles, ids, keys and roles: short tokens the runtime, a backend or ARIA names; longer ones are invalid."""
MAX_TEXT = 10_000
MAX_URL = 2048
MAX_VALUES = 50
MAX_VALUE = 500


def enforced(limit: int) -> AfterValidator:
    """A length limit that is checked but not published in the schema (a published one is `max_length`)."""

    def check(value: str) -> str:
        if len(value) > limit:
            raise ValueError(f"at most {limit} characters, not {len(value)}")
        return value

    return AfterValidator(check)


Short = Annotated[str, enforced(MAX_SHORT)]

ActionType = Literal["click", "type", "press", "scroll", "select", "navigate"]

WRITE_ACTIONS: frozenset[str] = frozenset({"click", "type", "press", "select", "navigate"})
"""Actions that can change the Page. `scroll` only moves the viewport."""


class Action(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: ActionType
    ref: Short | None = None
    text: str | None = Field(None, max_length=MAX_TEXT, description="type: text to enter.")
    submit: bool = Field(False, description="type: press Enter after.")
    key: Short | None = Field(None, description="press: e.g. Enter, Tab, Escape.")
    values: list[Annotated[str, enforced(MAX_VALUE)]] | None = Field(
        None, max_length=MAX_VALUES, description="select: option values or labels."
    )
    url: str | None = Field(None, max_length=MAX_URL, description="navigate: absolute http(s) URL.")
    direction: Literal["up", "down", "left", "right"] | None = None
    x: float | None = Field(None, allow_inf_nan=False, description="Viewport CSS px.")
    y: float | None = Field(None, allow_inf_nan=False)

    @model_validator(mode="after")
    def _fields_for_type(self) -> Action:
        point = self.x is not None or self.y is not None
        if point and (self.x is None or self.y is None):
            raise ValueError("a point needs both x and y")
        if point and self.type not in ("click", "scroll"):
            raise ValueError(f"{self.type} takes a ref, not a point")
        if point and self.ref is not None:
            raise ValueError("give either ref or x/y, not both")
        need: dict[str, tuple[str, ...]] = {
            "click": () if point else ("ref",),
            "type": ("ref", "text"),
            "press": ("key",),
            "scroll": ("direction",),
            "select": ("ref", "values"),
            "navigate": ("url",),
        }
        missing = [name for name in need[self.type] if getattr(self, name) is None]
        if missing:
            raise ValueError(f"{self.type} needs {', '.join(missing)}")
        if self.type == "navigate" and not str(self.url).startswith(("http://", "https://")):
            raise ValueError("navigate needs an absolute http(s) URL")
        return self

    @property
    def is_write(self) -> bool:
        return self.type in WRITE_ACTIONS

    @property
    def is_point(self) -> bool:
        return self.x is not None
