"""Hypothesis strategies for the MCP boundary of `computer_use`: arguments and `_meta` as a model or an attacker
could send them.

A generated call is symbolic where it needs live values: `Live("handle")`, `Live("session")`, `Live("frame")`,
`Live("ref")` and `Live("url")` stand for the authorized Page's handle, the current ComputerSession, its latest
frame, a ref of that frame and a fixture URL, filled in by the harness right before the call. So a strategy never
depends on the state of a run, shrinking stays meaningful, and some calls are genuinely valid and reach a backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

COMMANDS = ("list_pages", "observe", "act", "verify")
RELATIONS = ("left", "right", "above", "below", "other_window", "overlapping")
ARGUMENTS = ("command", "page", "detail", "offset", "computer_session_id", "frame_id", "action", "assertion")

TOKEN_KINDS = (
    "fresh",
    "missing_meta",
    "no_token",
    "replayed",
    "garbage",
    "tampered",
    "other_secret",
    "other_connection",
    "other_tool_call",
    "stale_request",
    "huge",
)
"""How the harness builds `_meta`: only `fresh` carries a token the runtime should accept."""


@dataclass(frozen=True)
class Live:
    """A value the harness fills in from the live run (see the module docstring)."""

    name: str

    def __repr__(self) -> str:
        return f"Live({self.name!r})"


@dataclass(frozen=True)
class Duplicated:
    """A JSON object with a repeated key: `pairs` in order. Only a raw transport can send it; a decoder keeps the
    last value of a key, so in-process it is the dict of the pairs."""

    pairs: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Meta:
    """`_meta` of one call: how to build the token (`TOKEN_KINDS`) and what else rides along."""

    token: str
    garbage: Any = None  # the token value for kind "garbage": any JSON value
    extra: tuple[tuple[str, Any], ...] = ()


lone_surrogates = st.characters(categories=["Cs"])
awkward = st.sampled_from(
    ["\u0000", "\u200b", "\u202e", "\ufeff", "\ufffd", "\n", "\r\n", '"', "\\", "[e1]", "𝔘", "é", "\u0301", "ﬁ"]
)


def texts(max_size: int = 40) -> st.SearchStrategy[str]:
    """Short strings: plain, any unicode, with lone surrogates, with control/bidi/zero-width characters."""
    return st.one_of(
        st.text(max_size=max_size),
        st.text(st.characters(codec="utf-8"), max_size=max_size),
        st.lists(st.one_of(st.characters(), lone_surrogates, awkward), max_size=max_size).map("".join),
    )


def huge_strings() -> st.SearchStrategy[str]:
    """Strings far beyond any sane input (up to ~1 MB of code points), built cheaply from a repeated piece."""
    return st.builds(
        lambda piece, times: piece * times,
        st.sampled_from(["x", "é\u200b𝔘", "(a+)+$", "\ud800", 'e1 button "Pay"\n']),
        st.integers(min_value=5_000, max_value=250_000),
    )


def strings() -> st.SearchStrategy[str]:
    return st.one_of(texts(), texts(200), huge_strings())


numbers = st.one_of(
    st.integers(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=True, allow_infinity=True)
)


def json_values(max_leaves: int = 8) -> st.SearchStrategy[Any]:
    """Any JSON value (and NaN/Infinity, which a lenient encoder emits): the wrong-type generator."""
    scalars = st.one_of(st.none(), st.booleans(), numbers, texts())
    return st.recursive(
        scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts(12), inner, max_size=4)),
        max_leaves=max_leaves,
    )


def either(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a plausible value, sometimes a string of any kind, sometimes any JSON value at all."""
    return st.one_of(good, good, strings(), json_values())


def actions() -> st.SearchStrategy[dict[str, Any]]:
    fields: dict[str, st.SearchStrategy[Any]] = {
        "ref": either(st.just(Live("ref"))),
        "text": either(st.sampled_from(["Ada Lovelace", "ada@example.com", ""])),
        "submit": either(st.booleans()),
        "key": either(st.sampled_from(["Tab", "Escape", "ArrowDown", "Tab Tab Enter", "Control+A", ""])),
        "values": either(st.lists(st.sampled_from(["fr", "de", "Japan", "zz"]), max_size=3)),
        "url": either(st.sampled_from([Live("url"), "javascript:alert(1)", "file:///etc/passwd", "http://[::1"])),
        "direction": either(st.sampled_from(["up", "down", "left", "right"])),
        "x": either(numbers),
        "y": either(numbers),
    }
    action_type = either(st.sampled_from(["click", "type", "press", "scroll", "select", "navigate"]))
    return st.fixed_dictionaries({"type": action_type}, optional={**fields, "surprise": json_values(3)})


def assertions() -> st.SearchStrategy[Any]:
    kinds = ["url_matches", "title_matches", "text_present", "text_absent", "element_state", "element_count"]
    leaf = st.fixed_dictionaries(
        {"type": either(st.sampled_from(kinds))},
        optional={
            "pattern": either(st.sampled_from([".", "Shipping", "^http", "(a+)+$", "[", "(?P<x>"])),
            "text": either(st.sampled_from(["Shipping details", "nowhere to be seen"])),
            "ref": either(st.just(Live("ref"))),
            "role": either(st.sampled_from(["button", "textbox", "link"])),
            "name": either(st.sampled_from(["Full name", "Continue"])),
            "state": either(st.sampled_from(["value", "checked", "visible", "enabled"])),
            "expected": either(st.one_of(st.booleans(), st.just(""))),
            "count": either(st.integers(min_value=-2, max_value=5)),
        },
    )
    return st.recursive(
        leaf,
        lambda inner: st.fixed_dictionaries(
            {"type": st.sampled_from(["all_of", "any_of"]), "of": st.lists(inner, max_size=3)}
        ),
        max_leaves=12,
    )


def valid_assertions() -> st.SearchStrategy[dict[str, Any]]:
    """Well-formed assertions, nested up to the depth limit with at most 15 checks, so that a verify reaches the
    live Page — and every code path that only a nested assertion takes (all_of/any_of in any position)."""
    leaf = st.one_of(
        st.fixed_dictionaries(
            {
                "type": st.sampled_from(["url_matches", "title_matches"]),
                "pattern": st.sampled_from([".", "dom_form", "^http", "Shipping|Full", "(a+)+$"]),
            }
        ),
        st.fixed_dictionaries(
            {
                "type": st.sampled_from(["text_present", "text_absent"]),
                "text": st.sampled_from(["Shipping details", "nowhere to be seen", "é\u200b𝔘"]),
            }
        ),
        st.fixed_dictionaries(
            {
                "type": st.just("element_state"),
                "ref": st.just(Live("ref")),
                "state": st.sampled_from(["checked", "visible", "enabled"]),
                "expected": st.booleans(),
            }
        ),
        st.fixed_dictionaries(
            {
                "type": st.just("element_state"),
                "ref": st.just(Live("ref")),
                "state": st.just("value"),
                "expected": st.sampled_from(["", "Ada Lovelace"]),
            }
        ),
        st.fixed_dictionaries(
            {
                "type": st.just("element_count"),
                "role": st.sampled_from(["button", "textbox"]),
                "count": st.integers(0, 5),
            }
        ),
    )

    def nested(part: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        return st.fixed_dictionaries(
            {"type": st.sampled_from(["all_of", "any_of"]), "of": st.lists(part, min_size=1, max_size=2)}
        )

    two = nested(leaf)
    three = nested(st.one_of(leaf, two))
    four = nested(st.one_of(leaf, two, three))
    return st.one_of(leaf, two, three, four)


def arguments() -> st.SearchStrategy[dict[str, Any]]:
    """The model's arguments: any subset of the real ones, each plausible or garbage, sometimes unknown keys."""
    fields: dict[str, st.SearchStrategy[Any]] = {
        "page": either(st.sampled_from([Live("handle"), *RELATIONS])),
        "detail": either(st.sampled_from(["interactive", "full", "visual", "diagnostics"])),
        "offset": either(st.integers(min_value=-1, max_value=40)),
        "computer_session_id": either(st.just(Live("session"))),
        "frame_id": either(st.just(Live("frame"))),
        "action": either(actions()),
        "assertion": either(st.one_of(valid_assertions(), assertions())),
    }
    return st.fixed_dictionaries(
        {"command": either(st.sampled_from(COMMANDS))},
        optional={**fields, "surprise": json_values(3), "_meta": json_values(3)},
    )


def valid_calls() -> st.SearchStrategy[dict[str, Any]]:
    """Well-formed calls on the authorized Page, so that a share of the run reaches the backend for real (a verify
    twice as often as each other kind: its assertion trees are the deepest input)."""
    session = {"computer_session_id": st.just(Live("session"))}
    acted = st.one_of(
        st.fixed_dictionaries({"type": st.just("click"), "ref": st.just(Live("ref"))}),
        st.fixed_dictionaries({"type": st.just("type"), "ref": st.just(Live("ref")), "text": texts(20)}),
        st.fixed_dictionaries({"type": st.just("press"), "key": st.sampled_from(["Tab", "Escape", "ArrowDown"])}),
        st.fixed_dictionaries({"type": st.just("scroll"), "direction": st.sampled_from(["up", "down"])}),
        st.fixed_dictionaries({"type": st.just("navigate"), "url": st.just(Live("url"))}),
    )
    verified = st.fixed_dictionaries({"command": st.just("verify"), **session, "assertion": valid_assertions()})
    return st.one_of(
        st.just({"command": "list_pages"}),
        st.fixed_dictionaries(
            {"command": st.just("observe"), "page": st.sampled_from([Live("handle"), "left"])},
            optional={"detail": st.sampled_from(["interactive", "full"])},
        ),
        st.fixed_dictionaries({"command": st.just("observe"), **session}),
        st.fixed_dictionaries(
            {"command": st.just("act"), **session, "frame_id": st.just(Live("frame")), "action": acted}
        ),
        verified,
        verified,
    )


def duplicated(args: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Duplicated]:
    """The same arguments with one key sent twice (the first value garbage, the last one the real one)."""
    return args.flatmap(
        lambda a: st.builds(
            lambda key, first: Duplicated(((key, first), *a.items())),
            st.sampled_from(sorted(a)),
            json_values(3),
        )
    )


def metas() -> st.SearchStrategy[Meta]:
    """`_meta`: a fresh token half of the time, else one of the ways a token is missing, forged or misused."""
    kinds = st.one_of(st.just("fresh"), st.sampled_from(TOKEN_KINDS))
    # progressToken is typed by the protocol (string or integer): the SDK's client refuses anything else itself.
    progress = st.tuples(st.just("progressToken"), st.one_of(st.integers(), texts()))
    extra = st.lists(
        st.one_of(progress, st.tuples(st.sampled_from(["x", "tool_call_id ", ""]), json_values(3))), max_size=2
    )
    return st.builds(Meta, kinds, st.one_of(json_values(), huge_strings()), extra.map(tuple))


def calls() -> st.SearchStrategy[tuple[Any, Meta]]:
    """One call: (arguments, meta). Arguments are valid, mutated or arbitrary; sometimes with a duplicate key."""
    args = st.one_of(valid_calls(), arguments(), arguments())
    return st.tuples(st.one_of(args, args, args, duplicated(args)), metas())
