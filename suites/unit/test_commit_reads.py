"""What a write goes through and what it commits (runtime/reading/commit.py), and the probe's structure reads
(runtime/reading/probe.py), against Chromium's own answers replayed.

The reads talk CDP, so a live Page is the only place they run for real; this file replays what Chromium answered
(recorded once from a live run of these very reads on a form page: a submit button with a `pointerdown` listener, a
select with a `change` listener, a link with a `mouseover` listener, a card field, a password, a same-origin iframe
with a button of the same name — `commit_reads_cdp.json`). The stand-in is strict: a command the recording does not
hold, with exactly these parameters, fails the test, so a read that asks Chromium something else is caught here,
fast, and the mapping of each answer into a `Target`/`Structure` is checked field by field. Failures Chromium gives
(a node gone, a frame gone, an AX tree that does not answer) are scripted on top of the recording."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.backend import Element
from runtime.cdp import CDPError
from runtime.models import Action
from runtime.reading import commit, probe
from runtime.reading.commit import (
    CommitTargets,
    FormRead,
    Target,
    holds_focus,
    live,
    loose,
    mode_of,
    read_commit,
)
from runtime.reading.probe import FrameContext, PageProbe, Structure, _role, ax_property

pytestmark = pytest.mark.req("unit:policy-rules")

RECORDING = json.loads(Path(__file__).with_name("commit_reads_cdp.json").read_text())["log"]
SCRIPTS = {
    "READ_ELEMENT": commit.READ_ELEMENT,
    "BY_ROLE_AND_NAME": commit.BY_ROLE_AND_NAME,
    "FOCUSED": commit.FOCUSED,
    "AT_POINT": commit.AT_POINT,
    "STRUCTURE_JS": probe.STRUCTURE_JS,
}
TARGET_ID = "09E504751BC0ECA1E953347A7A1A5958"
SESSION = "083C5723C60E3014498A199F95492D7F"
ORIGIN = "http://localhost:36937"
TOP = FrameContext(SESSION, TARGET_ID, f"{ORIGIN}/dom_form/", 4, True)
CHILD = FrameContext(SESSION, "6FCEBB9E9392638DB8E07DC09F7F1726", "about:srcdoc", 5, False)
PAY_FORM = FormRead(f"{ORIGIN}/pay", "post", ("Pay now",), ("on", "I agree"), True, True)
Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]
"""A scripted answer to one method; None: the recording's."""


class Unrecorded(LookupError):
    """A command Chromium was never asked in the recording (not a CDPError: no read may swallow it)."""


def _named(value: Any) -> Any:
    """Params with the runtime's page-side scripts replaced by their names, as the recording holds them."""
    if isinstance(value, str):
        for name, script in SCRIPTS.items():
            value = value.replace(script, f"<{name}>")
        return value
    if isinstance(value, dict):
        return {k: _named(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_named(v) for v in value]
    return value


class RecordedChromium:
    """A CDP connection that answers from the recording, scene by scene (a scene's own answers first, then any
    scene's: the attach and the frame tree are the same throughout). `script` overrides one method's answer."""

    def __init__(self, scene: str = "frames") -> None:
        self.scene = scene
        self.sent: list[tuple[str, Any]] = []
        self.script: dict[str, Handler] = {}
        self._used: set[int] = set()

    def listen(self, listener: object) -> None:
        """No events in a replay."""

    def unlisten(self, listener: object) -> None:
        """No events in a replay."""

    async def send(
        self, method: str, params: dict[str, Any] | None = None, session_id: str | None = None, timeout: float = 15.0
    ) -> dict[str, Any]:
        named = _named(params)
        self.sent.append((method, named))
        if method in self.script:
            scripted = await self.script[method](named)
            if scripted is not None:
                return scripted
        for scene in (self.scene, None):
            hits = [
                i
                for i, e in enumerate(RECORDING)
                if e["method"] == method
                and e["params"] == named
                and e["session"] == session_id
                and (scene is None or e["scene"] == scene)
            ]
            if hits:
                fresh = [i for i in hits if i not in self._used]
                index = fresh[0] if fresh else hits[-1]
                self._used.add(index)
                entry = RECORDING[index]
                if "error" in entry:
                    raise CDPError(entry["error"])
                return copy.deepcopy(entry["result"])
        raise Unrecorded(f"{method} {named} on {session_id} in {self.scene!r}")


def replay(scene: str) -> tuple[RecordedChromium, PageProbe]:
    chromium = RecordedChromium(scene)
    return chromium, PageProbe(chromium, TARGET_ID, watch_dialogs=False)  # type: ignore[arg-type]


async def attached(probe_: PageProbe, chromium: RecordedChromium, scene: str) -> list[FrameContext]:
    """The Page's frames as the probe finds them (the recording's first scene), then `scene`."""
    chromium.scene = "frames"
    frames = await probe_.frames()
    chromium.scene = scene
    return frames


def fails(message: str = "No node with given id found") -> Handler:
    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        raise CDPError(message)

    return handler


def answers(result: dict[str, Any]) -> Handler:
    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        return copy.deepcopy(result)

    return handler


def recorded(scene: str, method: str) -> dict[str, Any]:
    return copy.deepcopy(next(e["result"] for e in RECORDING if e["scene"] == scene and e["method"] == method))


PAY_TOP = Target(
    frame=TOP,
    role="button",
    names=("Pay now",),
    visible="Pay now",
    commits_form=True,
    form=PAY_FORM,
    href="",
    listens_pointer=True,
    listens_press=True,
    options=(),
    text_entry=False,
    frame_origin=ORIGIN,
    iframe_frame_id=None,
    accessible_name="Pay now",
    object_id="3741203540693080969.4.2",
)
PAY_CHILD = Target(
    frame=CHILD,
    role="button",
    names=("Pay now",),
    visible="Pay now",
    commits_form=False,
    form=None,
    href="",
    listens_pointer=False,
    listens_press=False,
    options=(),
    text_entry=False,
    frame_origin="null",
    iframe_frame_id=None,
    accessible_name="Pay now",
    object_id="3741203540693080969.5.2",
)


def press(key: str) -> Action:
    """A press as the read may meet it: mode_of also reads keys the model's input schema refuses (an upstream's
    own names), so the act is built unchecked."""
    return Action.model_construct(type="press", key=key)


# --- mode_of and loose: pure -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "mode"),
    [
        (Action(type="click", ref="e1"), "click"),
        (Action(type="click", x=1, y=2), "click"),
        (Action(type="select", ref="e1", values=["a"]), "select"),
        (Action(type="type", ref="e1", text="hi"), "type"),
        (Action(type="type", ref="e1", text="hi", submit=True), "submit"),
        (press("Enter"), "enter"),
        (press("Control+Enter"), "enter"),
        (press("Control+Shift+Enter"), "enter"),
        (press("NumpadEnter"), "enter"),
        (press(" Return "), "enter"),
        (press("Space"), "space"),
        (press("Shift+Spacebar"), "space"),
        (press(" "), "space"),
        (press("+"), None),
        (press("Tab"), None),
        (press("Control+a"), None),
        (Action(type="scroll", ref="e1", direction="down"), None),
        (Action(type="navigate", url="https://example.com/"), None),
    ],
)
def test_an_act_is_read_in_the_mode_its_element_is_activated_in(action: Action, mode: str | None) -> None:
    """The read asks the page what this activation commits: a wrong mode reads the wrong commit (Enter in a field
    submits its form, a click on it does not)."""
    assert mode_of(action) == mode


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("/api\u00a0/orders", "/api/orders"),
        ("Pay  Now", "pay now"),
        ("Pay\u200bnow", "paynow"),
        ("STRASSE", "strasse"),
        ("Stra\u00dfe", "strasse"),
        ("Pay\u200e now\n", "PAYNOW"),
    ],
)
def test_two_computations_of_one_name_are_the_same_loose_name(a: str, b: str) -> None:
    assert loose(a) == loose(b)


def test_a_loose_name_keeps_every_visible_character() -> None:
    assert loose("Pay now!") == "paynow!"
    assert loose("Pay now") != loose("Pay mow")


# --- read_commit over the recording -----------------------------------------------------------------------------


async def test_a_click_by_ref_reads_the_top_frames_element_by_its_ax_node_and_a_child_frames_by_its_dom() -> None:
    """Every live element with the ref's role and name is read, in frame order: the top one found in the browser's
    AX tree (named by it), the iframe's one by the DOM search; each with its form, listeners and origin."""
    chromium, probe_ = replay("click")
    frames = await attached(probe_, chromium, "click")
    assert frames == [TOP, CHILD]
    reading = await read_commit(probe_, Action(type="click", ref="e1"), Element("e1", "button", "Pay now"), frames)
    assert reading == CommitTargets([PAY_TOP, PAY_CHILD], found=True)
    assert ("Accessibility.queryAXTree", {"objectId": "3741203540693080969.4.1", "role": "button"}) in chromium.sent


async def test_a_select_whose_element_listens_for_change_commits_its_form() -> None:
    """The page says it does not (no onchange attribute), but a `change` listener on the select (read over CDP,
    where the page cannot hide it) submits the form as the option is picked."""
    chromium, probe_ = replay("select")
    frames = await attached(probe_, chromium, "select")
    act = Action(type="select", ref="e2", values=["Pro"])
    reading = await read_commit(probe_, act, Element("e2", "combobox", "Plan"), frames)
    assert reading == CommitTargets(
        [
            Target(
                frame=TOP,
                role="combobox",
                names=("Plan", "Plan"),
                visible="Basic Pro",
                commits_form=True,
                form=PAY_FORM,
                href="",
                listens_pointer=False,
                listens_press=False,
                options=(("Basic", "a"), ("Pro", "b")),
                text_entry=False,
                frame_origin=ORIGIN,
                accessible_name="Plan",
                object_id="3741203540693080969.4.3",
            )
        ]
    )


async def test_a_change_listener_commits_nothing_for_a_click_nor_for_a_select_without_a_form() -> None:
    chromium, probe_ = replay("select")
    frames = await attached(probe_, chromium, "select")
    remote = {"objectId": "3741203540693080969.4.3", "accessibleName": "Plan", "role": "combobox"}
    raw = recorded("select", "Runtime.callFunctionOn")
    raw["result"]["value"]["form"] = None
    chromium.script["Runtime.callFunctionOn"] = answers(raw)
    (formless,) = await commit._reads(probe_, frames[0], [remote], "select")
    assert formless.commits_form is False
    assert formless.form is None
    (clicked,) = await commit._reads(probe_, frames[0], [remote], "click")
    assert clicked.commits_form is False
    del chromium.script["Runtime.callFunctionOn"]
    chromium.script["DOMDebugger.getEventListeners"] = answers({"listeners": [{"type": "click"}]})
    (unheard,) = await commit._reads(probe_, frames[0], [remote], "select")
    assert unheard.form == PAY_FORM
    assert unheard.commits_form is False


async def test_a_read_keeps_the_refs_role_word_and_the_pages_text_entry() -> None:
    """The role the ref was found by (the snapshot's word) is the target's, over the element's own; a text field
    is read as one (Enter in it submits its form)."""
    chromium, probe_ = replay("select")
    frames = await attached(probe_, chromium, "select")
    raw = recorded("select", "Runtime.callFunctionOn")
    raw["result"]["value"]["textEntry"] = True
    chromium.script["Runtime.callFunctionOn"] = answers(raw)
    remote = {"objectId": "3741203540693080969.4.3", "accessibleName": "Plan", "role": "listbox"}
    (target,) = await commit._reads(probe_, frames[0], [remote], "select")
    assert target.role == "listbox"
    assert target.text_entry is True
    (own,) = await commit._reads(probe_, frames[0], [{"objectId": "3741203540693080969.4.3"}], "select")
    assert own.role == "combobox"


async def test_enter_reads_the_focused_element_with_its_own_role_and_no_accessible_name() -> None:
    chromium, probe_ = replay("enter")
    frames = await attached(probe_, chromium, "enter")
    reading = await read_commit(probe_, Action(type="press", key="Enter"), None, frames)
    focused = Target(
        **{
            **PAY_TOP.__dict__,
            "names": (),
            "accessible_name": "",
            "object_id": "3741203540693080969.4.5",
        }
    )
    assert reading == CommitTargets([focused])


async def test_a_point_click_reads_the_link_under_it_and_its_mouseover_listener() -> None:
    """A `mouseover` listener (no attribute) makes it a control that can rename itself under the pointer; it does
    not listen for the press."""
    chromium, probe_ = replay("point")
    frames = await attached(probe_, chromium, "point")
    reading = await read_commit(probe_, Action(type="click", x=10, y=251), None, frames)
    assert reading == CommitTargets(
        [
            Target(
                frame=TOP,
                role="link",
                names=(),
                visible="Terms",
                commits_form=False,
                form=None,
                href=f"{ORIGIN}/terms",
                listens_pointer=True,
                listens_press=False,
                frame_origin=ORIGIN,
                object_id="3741203540693080969.4.6",
            )
        ]
    )


async def test_a_press_on_nothing_focused_reads_nothing() -> None:
    chromium, probe_ = replay("focus_miss")
    frames = await attached(probe_, chromium, "focus_miss")
    assert await read_commit(probe_, Action(type="press", key="Enter"), None, frames) == CommitTargets([], found=True)


async def test_acts_that_commit_nothing_or_have_no_page_read_nothing() -> None:
    chromium, probe_ = replay("click")
    scroll = Action(type="scroll", ref="e1", direction="down")
    assert await read_commit(probe_, scroll, Element("e1", "button", "Pay now"), [TOP]) == CommitTargets([], found=True)
    click = Action(type="click", ref="e1")
    assert await read_commit(probe_, click, Element("e1", "button", "Pay now"), []) == CommitTargets([], found=False)
    assert await read_commit(probe_, click, None, [TOP]) == CommitTargets([], found=True)
    assert chromium.sent == []


async def test_a_ref_whose_element_is_gone_everywhere_is_not_found() -> None:
    chromium, probe_ = replay("click")
    frames = await attached(probe_, chromium, "click")
    chromium.script["Accessibility.queryAXTree"] = answers({"nodes": []})

    async def none_in_the_dom(params: dict[str, Any]) -> dict[str, Any] | None:
        if params["expression"] == '(<BY_ROLE_AND_NAME>)("button", "Pay later", 10)':
            return recorded("select", "Runtime.evaluate")  # Chromium's empty array (the select scene's search)
        return None

    chromium.script["Runtime.evaluate"] = none_in_the_dom
    reading = await read_commit(probe_, Action(type="click", ref="e1"), Element("e1", "button", "Pay later"), frames)
    assert reading == CommitTargets([], found=False)


async def test_the_read_stops_after_ten_elements_across_frames() -> None:
    """At most MAX_CANDIDATES per frame, and no further frame is read once they are found."""
    chromium, probe_ = replay("click")
    frames = await attached(probe_, chromium, "click")
    ax = recorded("click", "Accessibility.queryAXTree")
    ax["nodes"] = ax["nodes"] * 12
    chromium.script["Accessibility.queryAXTree"] = answers(ax)
    reading = await read_commit(probe_, Action(type="click", ref="e1"), Element("e1", "button", "Pay now"), frames)
    assert len(reading.targets) == commit.MAX_CANDIDATES
    assert {t.frame for t in reading.targets} == {TOP}
    assert not any(method == "Runtime.getProperties" for method, _ in chromium.sent)


# --- live: by the AX tree, by the DOM ---------------------------------------------------------------------------


async def test_the_ax_tree_match_skips_ignored_and_unbacked_nodes_and_compares_loose_names() -> None:
    chromium, probe_ = replay("click")
    await attached(probe_, chromium, "click")
    (node,) = recorded("click", "Accessibility.queryAXTree")["nodes"]
    renamed = {**node, "name": {"type": "computedString", "value": "PAY\u200b  now"}}
    ignored = {**node, "ignored": True}
    unbacked = {k: v for k, v in node.items() if k != "backendDOMNodeId"}
    nameless = {k: v for k, v in node.items() if k != "name"}
    chromium.script["Accessibility.queryAXTree"] = answers({"nodes": [ignored, unbacked, nameless, renamed]})
    found = await live(probe_, TOP, Element("e1", "button", "Pay now"))
    assert found == [
        {
            "type": "object",
            "subtype": "node",
            "className": "HTMLButtonElement",
            "description": "button#pay",
            "objectId": "3741203540693080969.4.2",
            "accessibleName": "PAY\u200b  now",
            "role": "button",
        }
    ]
    nameless_wanted = await live(probe_, TOP, Element("e1", "button", ""))
    assert [r["accessibleName"] for r in nameless_wanted] == [""]


async def test_a_node_gone_before_it_is_resolved_is_left_out_and_a_failed_ax_query_finds_nothing() -> None:
    chromium, probe_ = replay("click")
    await attached(probe_, chromium, "click")
    chromium.script["DOM.resolveNode"] = fails()
    assert await live(probe_, TOP, Element("e1", "button", "Pay now")) == []
    del chromium.script["DOM.resolveNode"]
    chromium.script["Accessibility.queryAXTree"] = fails("Frame gone")
    assert await commit._by_role_and_name(probe_, TOP, Element("e1", "button", "Pay now")) == []


async def test_an_ax_tree_that_does_not_answer_in_time_is_searched_by_its_dom(monkeypatch: pytest.MonkeyPatch) -> None:
    """A minimized window's tree may never answer: after AX_WAIT the frame's DOM is searched instead."""
    monkeypatch.setattr(commit, "AX_WAIT", 0.05)
    chromium, probe_ = replay("click")
    await attached(probe_, chromium, "click")

    async def never(params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.Event().wait()  # never set: only AX_WAIT (and the wait_for below) end it
        raise AssertionError("waited")

    async def document(params: dict[str, Any]) -> dict[str, Any] | None:
        return {"result": {"objectId": "doc5"}} if params["expression"] == "document" else None

    chromium.script["Accessibility.queryAXTree"] = never
    chromium.script["Runtime.evaluate"] = document
    as_top = FrameContext(CHILD.session, CHILD.frame_id, CHILD.url, CHILD.world, True)
    found = await asyncio.wait_for(live(probe_, as_top, Element("e1", "button", "Pay now")), 5)
    assert [(r["objectId"], r["accessibleName"], r["role"]) for r in found] == [
        ("3741203540693080969.5.2", "Pay now", "button")
    ]


async def test_the_dom_search_keeps_only_the_array_elements_and_finds_nothing_on_a_failure() -> None:
    chromium, probe_ = replay("click")
    await attached(probe_, chromium, "click")
    listing = recorded("click", "Runtime.getProperties")
    names = [p["name"] for p in listing["result"]]
    assert "0" in names
    assert "length" in names
    listing["result"].append({"name": "1", "value": {"type": "undefined"}})
    listing["result"].append({"name": "2", "get": {"type": "function", "objectId": "getter"}})  # an accessor
    listing["result"].append({"value": {"type": "object", "objectId": "unnamed"}})
    chromium.script["Runtime.getProperties"] = answers(listing)
    found = await live(probe_, CHILD, Element("e1", "button", "Pay now"))
    assert [r["objectId"] for r in found] == ["3741203540693080969.5.2"]
    chromium.script["Runtime.getProperties"] = answers({})
    assert await live(probe_, CHILD, Element("e1", "button", "Pay now")) == []
    chromium.script["Runtime.getProperties"] = fails("Cannot find context with specified id")
    assert await live(probe_, CHILD, Element("e1", "button", "Pay now")) == []
    del chromium.script["Runtime.getProperties"]
    chromium.script["Runtime.evaluate"] = answers({"result": {"type": "undefined"}})
    assert await live(probe_, CHILD, Element("e1", "button", "Pay now")) == []


# --- _read and _listeners ---------------------------------------------------------------------------------------


async def test_an_iframe_read_carries_its_child_frame_id() -> None:
    """A point over another site's iframe reads the frame element: the child frame is what the click reaches."""
    chromium, probe_ = replay("point")
    await attached(probe_, chromium, "point")
    raw = recorded("point", "Runtime.callFunctionOn")
    raw["result"]["value"]["tag"] = "iframe"
    chromium.script["Runtime.callFunctionOn"] = answers(raw)
    described = recorded("point", "DOM.describeNode")
    described["node"]["frameId"] = "OOPIF1"

    async def describe(params: dict[str, Any]) -> dict[str, Any] | None:
        return copy.deepcopy(described) if params == {"objectId": "3741203540693080969.4.6"} else None

    chromium.script["DOM.describeNode"] = describe
    chromium.script["DOMDebugger.getEventListeners"] = answers({"listeners": []})
    chromium.script["DOM.resolveNode"] = answers({"object": {"objectId": "x"}})
    chromium.script["Runtime.releaseObject"] = answers({})
    (target,) = await commit._reads(probe_, TOP, [{"objectId": "3741203540693080969.4.6"}], "click")
    assert target.iframe_frame_id == "OOPIF1"
    raw["result"]["value"]["tag"] = "frame"
    (target,) = await commit._reads(probe_, TOP, [{"objectId": "3741203540693080969.4.6"}], "click")
    assert target.iframe_frame_id == "OOPIF1"


async def test_remotes_without_an_object_are_not_read() -> None:
    chromium, probe_ = replay("point")
    await attached(probe_, chromium, "point")
    assert await commit._reads(probe_, TOP, [{}, {"type": "object", "subtype": "null"}], "click") == []


@pytest.mark.parametrize(
    ("types", "pointer", "press"),
    [
        ([], False, False),
        (["click"], False, False),
        (["pointerover"], True, False),
        (["pointerenter"], True, False),
        (["mouseover"], True, False),
        (["mouseenter"], True, False),
        (["pointermove"], True, False),
        (["mousemove"], True, False),
        (["pointerdown"], True, True),
        (["mousedown"], True, True),
        (["change"], False, False),
    ],
)
async def test_the_events_an_element_listens_for_decide_whether_it_can_rename_itself(
    types: list[str], pointer: bool, press: bool
) -> None:
    chromium, probe_ = replay("point")
    await attached(probe_, chromium, "point")
    chromium.script["DOMDebugger.getEventListeners"] = answers({"listeners": [{"type": t} for t in types]})
    (target,) = await commit._reads(probe_, TOP, [{"objectId": "3741203540693080969.4.6"}], "click")
    assert (target.listens_pointer, target.listens_press) == (pointer, press)


async def test_the_listeners_are_asked_of_the_pages_own_world_and_its_handle_released() -> None:
    chromium, probe_ = replay("point")
    await attached(probe_, chromium, "point")
    assert await commit._listeners(probe_, TOP, "3741203540693080969.4.6") == {"mouseover"}
    assert ("DOMDebugger.getEventListeners", {"objectId": "3741203540693080969.2.4"}) in chromium.sent
    assert chromium.sent[-1] == ("Runtime.releaseObject", {"objectId": "3741203540693080969.2.4"})


async def test_listeners_that_cannot_be_read_are_none_and_the_handle_is_still_released() -> None:
    chromium, probe_ = replay("point")
    await attached(probe_, chromium, "point")
    chromium.script["DOMDebugger.getEventListeners"] = fails()
    chromium.script["Runtime.releaseObject"] = fails()
    assert await commit._listeners(probe_, TOP, "3741203540693080969.4.6") == set()
    assert chromium.sent[-1] == ("Runtime.releaseObject", {"objectId": "3741203540693080969.2.4"})
    chromium.script["DOMDebugger.getEventListeners"] = answers({"listeners": [{"useCapture": False}]})
    assert await commit._listeners(probe_, TOP, "3741203540693080969.4.6") == {""}
    chromium.script["DOMDebugger.getEventListeners"] = answers({})
    assert await commit._listeners(probe_, TOP, "3741203540693080969.4.6") == set()
    chromium.script["DOM.resolveNode"] = fails()
    assert await commit._listeners(probe_, TOP, "3741203540693080969.4.6") == set()
    chromium.script["DOM.describeNode"] = answers({"node": {}})
    assert await commit._listeners(probe_, TOP, "3741203540693080969.4.6") == set()


# --- holds_focus ------------------------------------------------------------------------------------------------


async def test_a_key_goes_to_the_read_element_only_when_it_holds_the_focus() -> None:
    """Compared by the browser's node id: the focused `Pay now` is the top frame's one (node 19), not the child's."""
    chromium, probe_ = replay("focus_miss")
    reading = CommitTargets([PAY_TOP, PAY_CHILD])
    assert await holds_focus(probe_, reading) is False
    chromium.scene = "focus_hit"
    assert await holds_focus(probe_, reading) is True
    assert await holds_focus(probe_, CommitTargets([PAY_CHILD])) is False
    assert await holds_focus(probe_, CommitTargets([])) is False
    elsewhere = Target(**{**PAY_TOP.__dict__, "frame": FrameContext("OTHER", TARGET_ID, TOP.url, 4, True)})
    assert await holds_focus(probe_, CommitTargets([elsewhere])) is False
    unread = Target(**{**PAY_TOP.__dict__, "object_id": ""})
    assert await holds_focus(probe_, CommitTargets([unread])) is False


async def test_focus_is_not_held_when_a_node_is_gone_or_there_is_no_top_document() -> None:
    chromium, probe_ = replay("focus_hit")
    chromium.script["DOM.describeNode"] = fails()
    assert await holds_focus(probe_, CommitTargets([PAY_TOP])) is False
    chromium.script["DOM.describeNode"] = answers({"node": {}})
    assert await holds_focus(probe_, CommitTargets([PAY_TOP])) is False

    async def no_frames() -> list[FrameContext]:
        return []

    async def child_only() -> list[FrameContext]:
        return [CHILD]

    probe_.frames = no_frames  # type: ignore[method-assign]
    assert await holds_focus(probe_, CommitTargets([PAY_TOP])) is False
    probe_.frames = child_only  # type: ignore[method-assign]
    assert await holds_focus(probe_, CommitTargets([PAY_CHILD])) is False


async def test_the_focus_is_compared_in_the_top_documents_session_only() -> None:
    """An out-of-process frame listed after the top one is another session: neither the focus nor the candidates
    are read there."""
    _, probe_ = replay("focus_hit")
    oopif = FrameContext("OOPIF-SESSION", "OOPIF", "https://other.example/", 9, False)

    async def with_oopif() -> list[FrameContext]:
        return [TOP, oopif]

    probe_.frames = with_oopif  # type: ignore[method-assign]
    assert await holds_focus(probe_, CommitTargets([PAY_TOP])) is True


async def test_a_focused_element_that_cannot_be_described_matches_no_candidate_even_a_gone_one() -> None:
    """Two unknowns are not the same node: the focused element and a candidate both gone is not a match."""
    chromium, probe_ = replay("focus_hit")

    async def gone(params: dict[str, Any]) -> dict[str, Any] | None:
        if params["objectId"] in ("3741203540693080969.4.4", "gone"):
            raise CDPError("No node with given id found")
        return None

    chromium.script["DOM.describeNode"] = gone
    stale = Target(**{**PAY_TOP.__dict__, "object_id": "gone"})
    assert await holds_focus(probe_, CommitTargets([PAY_TOP, stale])) is False


# --- probe: structure, ax_nodes, query_ax, is_visible, _role, ax_property ---------------------------------------


async def test_the_structure_of_a_page_is_read_across_its_frames() -> None:
    chromium, probe_ = replay("structure")
    frames = await attached(probe_, chromium, "structure")
    assert await probe_.structure(frames) == Structure(
        f"{ORIGIN}/dom_form/",
        "Checkout · Shipping details — Northwind Outfitters",
        has_password=True,
        has_captcha=False,
        has_payment_fields=True,
        foreign_forms=frozenset(),
    )
    chromium.scene = "structure"
    assert (await probe_.structure()).url == f"{ORIGIN}/dom_form/"  # the frames read now when not given


def _structure_answers(top: dict[str, Any], child: dict[str, Any] | None) -> Handler:
    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        if params["contextId"] == TOP.world:
            return {"result": {"type": "object", "value": top}}
        if child is None:
            raise CDPError("Cannot find context with specified id")
        return {"result": {"type": "object", "value": child}}

    return handler


PLAIN = {
    "url": f"{ORIGIN}/x",
    "origin": ORIGIN,
    "title": "Shop",
    "password": False,
    "payment": False,
    "frames": [],
    "captcha": False,
    "fields": 1,
}


@pytest.mark.parametrize(
    ("top", "child", "child_url", "expected"),
    [
        ({}, {}, "about:srcdoc", (False, False, False, frozenset())),
        ({}, {"password": True}, "about:srcdoc", (True, False, False, frozenset())),
        ({}, {"captcha": True}, "about:srcdoc", (False, True, False, frozenset())),
        ({}, {"payment": True}, "about:srcdoc", (False, False, True, frozenset())),
        ({}, {}, "https://www.google.com/recaptcha/api2/anchor", (False, True, False, frozenset())),
        ({"frames": ["https://hcaptcha.com/x  "]}, {}, "about:srcdoc", (False, True, False, frozenset())),
        ({}, {}, "https://js.stripe.com/v3/elements", (False, False, True, frozenset())),
        ({"frames": [" Secure card input frame "]}, {}, "about:srcdoc", (False, False, True, frozenset())),
        ({}, {"origin": "https://pay.example"}, "about:srcdoc", (False, False, False, frozenset({CHILD.frame_id}))),
        ({}, {"origin": "https://pay.example", "fields": 0}, "about:srcdoc", (False, False, False, frozenset())),
        ({"password": True, "fields": 0}, {}, "about:srcdoc", (True, False, False, frozenset())),
    ],
)
async def test_what_one_frame_holds_is_what_the_page_holds(
    top: dict[str, Any], child: dict[str, Any], child_url: str, expected: tuple[Any, ...]
) -> None:
    chromium, probe_ = replay("structure")
    chromium.script["Runtime.evaluate"] = _structure_answers({**PLAIN, **top}, {**PLAIN, **child})
    child_frame = FrameContext(CHILD.session, CHILD.frame_id, child_url, CHILD.world, False)
    found = await probe_.structure([TOP, child_frame])
    assert (found.url, found.title) == (f"{ORIGIN}/x", "Shop")
    assert (found.has_password, found.has_captcha, found.has_payment_fields, found.foreign_forms) == expected


async def test_a_child_frame_gone_is_skipped_and_a_top_document_gone_is_an_error() -> None:
    chromium, probe_ = replay("structure")
    chromium.script["Runtime.evaluate"] = _structure_answers({**PLAIN, "password": True}, None)
    assert (await probe_.structure([TOP, CHILD])).has_password is True
    with pytest.raises(CDPError, match=r"^probe could not read the top document$"):
        await probe_.structure([CHILD])
    with pytest.raises(CDPError, match=r"^probe could not read the top document$"):
        await probe_.structure([])


async def test_ax_nodes_of_a_role_word_of_many_chromium_roles_are_asked_by_name_in_tree_order() -> None:
    chromium, probe_ = replay("ax_textbox")
    nodes = await probe_.ax_nodes("textbox", "Card")
    assert [n["backendDOMNodeId"] for n in nodes] == [15]
    assert chromium.sent[-1] == (
        "Accessibility.queryAXTree",
        {"objectId": "3741203540693080969.4.1", "accessibleName": "Card"},
    )
    chromium.scene = "ax_button"
    nodes = await probe_.ax_nodes("button", "Pay now")
    assert [(_role(n), n["backendDOMNodeId"]) for n in nodes] == [("button", 19)]


async def test_ax_nodes_drop_ignored_nodes_and_other_roles_and_ask_each_role_without_a_name() -> None:
    chromium, probe_ = replay("ax_textbox")
    (card,) = recorded("ax_textbox", "Accessibility.queryAXTree")["nodes"]
    other = {**card, "role": {"type": "role", "value": "button"}, "backendDOMNodeId": 99}
    hidden = {**card, "ignored": True, "backendDOMNodeId": 98}
    chromium.script["Accessibility.queryAXTree"] = answers({"nodes": [other, hidden, card]})
    assert [n["backendDOMNodeId"] for n in await probe_.ax_nodes("textbox", "Card")] == [15]
    chromium.sent.clear()
    await probe_.ax_nodes("textbox", "")
    asked = [params for method, params in chromium.sent if method == "Accessibility.queryAXTree"]
    assert len(asked) > 1
    assert all("role" in p and p["accessibleName"] == "" for p in asked)
    assert [p["role"] for p in asked] == sorted(p["role"] for p in asked)
    chromium.sent.clear()
    image = {**card, "role": {"type": "role", "value": "image"}}
    chromium.script["Accessibility.queryAXTree"] = answers({"nodes": [image]})
    assert await probe_.ax_nodes("img", "Card") == [image]  # `img` is two Chromium roles: one query by name
    assert [p for m, p in chromium.sent if m == "Accessibility.queryAXTree"] == [
        {"objectId": "3741203540693080969.4.1", "accessibleName": "Card"}
    ]
    chromium.sent.clear()
    await probe_.ax_nodes("button", None)
    assert [p for m, p in chromium.sent if m == "Accessibility.queryAXTree"] == [
        {"objectId": "3741203540693080969.4.1", "role": "button"}
    ]


async def test_a_query_on_a_document_gone_asks_for_the_document_again_once() -> None:
    chromium, probe_ = replay("ax_button")
    await attached(probe_, chromium, "ax_button")
    answer = recorded("ax_button", "Accessibility.queryAXTree")
    calls: list[dict[str, Any]] = []

    async def stale_once(params: dict[str, Any]) -> dict[str, Any]:
        calls.append(params)
        if len(calls) == 1:
            raise CDPError("Could not find node with given id")
        return copy.deepcopy(answer)

    chromium.script["Accessibility.queryAXTree"] = stale_once
    nodes = await probe_.query_ax(TOP, "button", "Pay now")
    assert [n["backendDOMNodeId"] for n in nodes] == [19]
    documents = [p for m, p in chromium.sent if m == "Runtime.evaluate" and p["expression"] == "document"]
    assert len(documents) == 2
    assert len(calls) == 2
    assert calls[1] == {"objectId": "3741203540693080969.4.1", "role": "button", "accessibleName": "Pay now"}


async def test_an_element_with_a_box_is_visible_and_one_without_is_not() -> None:
    chromium, probe_ = replay("visible")
    assert await probe_.is_visible(15) is True
    chromium.scene = "hidden"
    assert await probe_.is_visible(45) is False


def test_a_nodes_role_and_properties_are_read_from_chromiums_shape() -> None:
    (card,) = recorded("ax_textbox", "Accessibility.queryAXTree")["nodes"]
    assert _role(card) == "textbox"
    assert _role({}) == ""
    assert _role({"role": None}) == ""
    assert _role({"role": {}}) == ""
    assert ax_property(card, "focusable") is True
    assert ax_property(card, "editable") == "plaintext"
    assert ax_property(card, "required") is False
    assert ax_property(card, "checked") is None
    assert ax_property({}, "focusable") is None
    assert ax_property({"properties": [{"name": "focusable"}]}, "focusable") is None
    unnamed_first = {"properties": [{"value": {"value": 1}}, {"name": "level", "value": {"value": 2}}]}
    assert ax_property(unnamed_first, "level") == 2
