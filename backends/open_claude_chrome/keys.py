"""Key names of the `computer` tool's `key` action, turned into CDP `Input.dispatchKeyEvent` parameters.

The contract's `text` for `key` is space-separated chords (`"Backspace Backspace"`, `"ctrl+a"`, `"shift+Tab"`).
Modifiers travel as the event's bitmask rather than as key presses of their own: one chord is one keyDown and one
keyUp, so a chord cannot leave a modifier stuck down if the page goes away between events.
"""

from __future__ import annotations

from dataclasses import dataclass

MODIFIER_BITS = {
    "alt": 1,
    "option": 1,
    "ctrl": 2,
    "control": 2,
    "meta": 4,
    "cmd": 4,
    "command": 4,
    "super": 4,
    "win": 4,
    "windows": 4,
    "shift": 8,
}


@dataclass(frozen=True)
class Key:
    key: str
    code: str
    key_code: int
    text: str = ""  # what the key types (Enter types "\r"); empty for keys that type nothing


_NAMED: dict[str, Key] = {
    "enter": Key("Enter", "Enter", 13, "\r"),
    "tab": Key("Tab", "Tab", 9),
    "escape": Key("Escape", "Escape", 27),
    "backspace": Key("Backspace", "Backspace", 8),
    "delete": Key("Delete", "Delete", 46),
    "insert": Key("Insert", "Insert", 45),
    "space": Key(" ", "Space", 32, " "),
    "arrowup": Key("ArrowUp", "ArrowUp", 38),
    "arrowdown": Key("ArrowDown", "ArrowDown", 40),
    "arrowleft": Key("ArrowLeft", "ArrowLeft", 37),
    "arrowright": Key("ArrowRight", "ArrowRight", 39),
    "home": Key("Home", "Home", 36),
    "end": Key("End", "End", 35),
    "pageup": Key("PageUp", "PageUp", 33),
    "pagedown": Key("PageDown", "PageDown", 34),
}
_ALIASES = {
    "return": "enter",
    "esc": "escape",
    "del": "delete",
    "up": "arrowup",
    "down": "arrowdown",
    "left": "arrowleft",
    "right": "arrowright",
    "page_up": "pageup",
    "page_down": "pagedown",
    "pgup": "pageup",
    "pgdn": "pagedown",
    "spacebar": "space",
}
_PUNCTUATION = {
    ";": ("Semicolon", 186),
    "=": ("Equal", 187),
    ",": ("Comma", 188),
    "-": ("Minus", 189),
    ".": ("Period", 190),
    "/": ("Slash", 191),
    "`": ("Backquote", 192),
    "[": ("BracketLeft", 219),
    "\\": ("Backslash", 220),
    "]": ("BracketRight", 221),
    "'": ("Quote", 222),
}


@dataclass(frozen=True)
class Chord:
    key: Key
    modifiers: int


class UnknownKey(ValueError):
    """A key name this table does not know."""


def lookup(name: str) -> Key:
    lowered = name.lower()
    lowered = _ALIASES.get(lowered, lowered)
    if lowered in _NAMED:
        return _NAMED[lowered]
    if len(lowered) >= 2 and lowered[0] == "f" and lowered[1:].isdigit() and 1 <= int(lowered[1:]) <= 12:
        number = int(lowered[1:])
        return Key(f"F{number}", f"F{number}", 111 + number)
    if len(name) == 1:
        char = name
        if char.isalpha() and char.isascii():
            return Key(char, f"Key{char.upper()}", ord(char.upper()), char)
        if char.isdigit():
            return Key(char, f"Digit{char}", ord(char), char)
        if char in _PUNCTUATION:
            code, key_code = _PUNCTUATION[char]
            return Key(char, code, key_code, char)
        return Key(char, "", 0, char)
    raise UnknownKey(f"unknown key {name!r}")


def parse(text: str) -> list[Chord]:
    """`"ctrl+a Delete"` → [Chord(a, ctrl), Chord(Delete, 0)]. Raises UnknownKey on an unknown name."""
    chords: list[Chord] = []
    for part in text.split():
        names = part.split("+") if part != "+" else ["+"]
        *mods, last = names
        bits = 0
        for mod in mods:
            if mod.lower() not in MODIFIER_BITS:
                raise UnknownKey(f"unknown modifier {mod!r} in {part!r}")
            bits |= MODIFIER_BITS[mod.lower()]
        chords.append(Chord(lookup(last), bits))
    if not chords:
        raise UnknownKey("no key given")
    return chords


def modifier_bits(modifiers: str | None) -> int:
    """The contract's click `modifiers` (`"ctrl+shift"`) as CDP's bitmask."""
    bits = 0
    for name in (modifiers or "").replace(" ", "").split("+"):
        if not name:
            continue
        if name.lower() not in MODIFIER_BITS:
            raise UnknownKey(f"unknown modifier {name!r}")
        bits |= MODIFIER_BITS[name.lower()]
    return bits


def events(chord: Chord) -> list[dict[str, object]]:
    """The keyDown/keyUp pair for one chord. A chord with ctrl/alt/meta types no text (it is a shortcut)."""
    key = chord.key
    types_text = bool(key.text) and not chord.modifiers & (1 | 2 | 4)
    text = key.text.upper() if types_text and chord.modifiers & 8 and key.text.isalpha() else key.text
    down: dict[str, object] = {
        "type": "keyDown" if types_text else "rawKeyDown",
        "key": key.key.upper() if text != key.text else key.key,
        "code": key.code,
        "windowsVirtualKeyCode": key.key_code,
        "nativeVirtualKeyCode": key.key_code,
        "modifiers": chord.modifiers,
    }
    if types_text:
        down["text"] = text
        down["unmodifiedText"] = key.text
    up = {k: v for k, v in down.items() if k not in ("text", "unmodifiedText")}
    up["type"] = "keyUp"
    return [down, up]
