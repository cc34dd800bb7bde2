"""Action: exactly one user-level operation per `act`, addressed by a ref from the latest Frame.

One flat model (not a union) keeps the tool schema small; the validator says precisely which field a given
action type needs, which is what an agent needs to fix its call.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ActionType = Literal["click", "type", "press", "scroll", "select", "navigate"]

WRITE_ACTIONS: frozenset[str] = frozenset({"click", "type", "press", "select", "navigate"})
"""Actions that can change the Page. `scroll` only moves the viewport."""


class Action(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: ActionType
    ref: str | None = Field(None, description="Ref from the latest frame.")
    text: str | None = Field(None, description="type: text to enter.")
    submit: bool = Field(False, description="type: press Enter after.")
    key: str | None = Field(None, description="press: e.g. Enter, Tab, Escape.")
    values: list[str] | None = Field(None, description="select: option values or labels.")
    url: str | None = Field(None, description="navigate: absolute http(s) URL.")
    direction: Literal["up", "down", "left", "right"] | None = None
    x: float | None = Field(None, description="Viewport CSS px.")
    y: float | None = None

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
