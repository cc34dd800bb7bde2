"""Action: exactly one user-level operation per `act`, addressed by a ref from the latest Frame.

One flat model (not a union) keeps the tool schema small; the validator says precisely which field a given
action type needs, which is what an agent needs to fix its call.

Every string and list is bounded (docs/mcp.md, "Limits"): a model's arguments are untrusted input too, and an
oversized one is refused before any backend call. Every limit is published as `maxLength`/`maxItems`, because a
client can only respect a bound it is told (spec 004); the published bound is the enforced one.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_SHORT = 64
"""Refs, handles, ids and roles: short tokens the runtime, a backend or ARIA names; longer ones are invalid."""
MAX_TEXT = 10_000
MAX_NAVIGATE_URL = 2048
MAX_VALUES = 50
MAX_VALUE = 500


Short = Annotated[str, Field(max_length=MAX_SHORT)]

MODIFIERS = {"control": "Control", "ctrl": "Control", "shift": "Shift", "alt": "Alt", "meta": "Meta", "cmd": "Meta"}
"""Modifier names a chord may start with (any case), and the spelling every backend's keyboard knows."""
NAMED_KEYS = {
    name.lower(): name
    for name in (
        "Enter", "Tab", "Escape", "Backspace", "Delete", "Insert", "Space", "Home", "End", "PageUp", "PageDown",
        "ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", *(f"F{n}" for n in range(1, 13)),
    )
} | {"esc": "Escape", "return": "Enter"}  # fmt: skip
"""The named keys all three backends map (Playwright's and Puppeteer's key names, open_claude_chrome's table)."""
MAX_KEY = max(map(len, NAMED_KEYS)) + sum(
    max(len(name) + 1 for name in MODIFIERS if MODIFIERS[name] == modifier) for modifier in set(MODIFIERS.values())
)
"""The longest key `one_key` takes (every modifier, each in its longest spelling, then the longest key name):
published as the bound, so a key at it can be valid and one past it never is."""
KEY_RULE = (
    "press takes exactly one key or one chord per act: a key name (Enter, Tab, Escape, Backspace, Delete, Insert, "
    "Space, Home, End, PageUp, PageDown, ArrowUp/Down/Left/Right, F1-F12) or one printable ASCII character, "
    "optionally after modifiers (Control+, Shift+, Alt+, Meta+), e.g. Enter, Shift+Tab, Control+A; for several "
    "keys, act once per key"
)


def one_key(value: str) -> str:
    """The one key or chord `value` names, spelled as every backend's keyboard knows it (`ctrl+a` -> `Control+a`).

    Several keys in one act ("Tab Tab Enter") would be several writes the runtime checks as one, so they are refused,
    as is anything one of the backends would read differently (a key only one upstream knows, a doubled modifier)."""
    if value == " ":
        return "Space"
    *modifiers, key = value.split("+") if value != "+" else ["+"]
    canonical = [MODIFIERS.get(m.lower(), "") for m in modifiers]
    if not all(canonical) or len(set(canonical)) != len(canonical):
        raise ValueError(KEY_RULE)
    if key.lower() in NAMED_KEYS:
        key = NAMED_KEYS[key.lower()]
    elif not (len(key) == 1 and "!" <= key <= "~") or (key == "+" and modifiers):
        raise ValueError(KEY_RULE)
    return "+".join([*canonical, key])


ActionType = Literal["click", "type", "press", "scroll", "select", "navigate"]

WRITE_ACTIONS: frozenset[str] = frozenset({"click", "type", "press", "select", "navigate"})
"""Actions that can change the Page. `scroll` only moves the viewport."""


class Action(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: ActionType = Field(description="click, type, select: a ref (click: or x/y); press: key; scroll: direction.")
    ref: Short | None = Field(None, description="A ref from the latest frame.")
    text: str | None = Field(None, max_length=MAX_TEXT, description="type: text to enter.")
    submit: bool = Field(False, description="type: press Enter after.")
    key: str | None = Field(None, max_length=MAX_KEY, description="press: one key, e.g. Enter, Shift+Tab.")
    values: list[Annotated[str, Field(max_length=MAX_VALUE)]] | None = Field(
        None, max_length=MAX_VALUES, description="select: option values or labels."
    )
    url: str | None = Field(None, max_length=MAX_NAVIGATE_URL, description="navigate: absolute http(s) URL.")
    direction: Literal["up", "down", "left", "right"] | None = Field(
        None, description="scroll: which way; hovers a ref."
    )
    x: float | None = Field(None, allow_inf_nan=False, description="Viewport CSS px.")
    y: float | None = Field(None, allow_inf_nan=False, description="Viewport CSS px.")

    @field_validator("key")
    @classmethod
    def _one_key(cls, value: str | None) -> str | None:
        return None if value is None else one_key(value)

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
