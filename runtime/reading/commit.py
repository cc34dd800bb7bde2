"""What a write would commit, read by the runtime itself just before the input is sent.

The policy must not decide from the frame the agent saw (it may be old, and the page wrote it): before every write
the probe finds the live element again — by ref (the frame's role and name, looked up in the browser's own
accessibility tree of every frame), by point (the element under the coordinates, through open shadow roots and
same-origin frames), or by focus (what Enter or Space would activate) — and reads what activating it would do:
its names, its visible text, its form (action, method, submit controls, password and card fields), its link, and
whether it listens for the pointer (a control that can rename itself under the pointer) or for the press itself (a
control that can rename itself between press and release). Reads only; the pointer is moved to where a click will
press before this read (runtime/pointer.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from runtime.backend import Element
from runtime.cdp import CDPError
from runtime.composed import COMPOSED
from runtime.models import Action
from runtime.reading.probe import FrameContext, PageProbe
from runtime.roles import chromium_roles

MAX_CANDIDATES = 10
AX_WAIT = 1.0
"""Seconds the accessibility tree of one frame gets to answer before its DOM is searched instead."""
"""Live elements read per ref (same role and name, in any frame): if any of them is sensitive, the act is."""
HOVER_EVENTS = frozenset(
    {"pointerover", "pointerenter", "mouseover", "mouseenter", "pointerdown", "mousedown", "pointermove", "mousemove"}
)
PRESS_EVENTS = frozenset({"pointerdown", "mousedown"})
"""What a control hears between the press and the release of one click: the only moment left after the pointer has
reached it and the runtime has read it (the backend presses and releases in one call)."""
CHANGE_EVENTS = frozenset({"change", "input"})

READ_ELEMENT = (
    "function (mode) {"
    + COMPOSED
    + r"""
  const el = this;
  const cut = s => (s || '').replace(/\s+/g, ' ').trim().slice(0, 300);
  const root = el.getRootNode();
  const byId = id => (root.getElementById ? root.getElementById(id) : document.getElementById(id));
  const labelled = (el.getAttribute('aria-labelledby') || '').split(/\s+/).filter(Boolean)
      .map(id => (byId(id) || {}).textContent || '').join(' ');
  const labels = [el.getAttribute('aria-label'), labelled, ...[...(el.labels || [])].map(l => l.textContent),
                  el.getAttribute('title'), el.getAttribute('alt'), el.localName === 'input' ? el.value : '',
                  ...[...el.querySelectorAll('img[alt]')].slice(0, 5).map(i => i.alt)].map(cut).filter(Boolean);
  const visible = cut(composed.text(el, 2000));
  const tag = el.localName;
  const type = (el.getAttribute('type') || '').toLowerCase();
  const typeOf = b => (b.getAttribute('type') || '').toLowerCase();
  const isSubmit = b => (b.localName === 'button' && ['', 'submit'].includes(typeOf(b)))
      || (b.localName === 'input' && ['submit', 'image'].includes(typeOf(b)));
  const textEntry = tag === 'input' && !['button', 'submit', 'image', 'reset', 'checkbox', 'radio', 'file', 'hidden',
      'range', 'color'].includes(type);
  // A form past a shadow boundary is not the control's form owner (the browser does not submit it), but a web
  // component's submit button submits the form around its host by script: it is read as that form's.
  const form = el.form || composed.closest(el, 'form');
  let commitsForm = false;
  if (mode === 'click' || mode === 'space') commitsForm = !!form && isSubmit(el);
  if (mode === 'enter') commitsForm = !!form && (isSubmit(el) || textEntry);
  if (mode === 'submit') commitsForm = !!form;
  if (mode === 'select') commitsForm = !!form && (el.hasAttribute('onchange') || el.hasAttribute('oninput')
      || form.hasAttribute('onchange') || form.hasAttribute('oninput'));
  let formRead = null;
  if (form) {
    const inside = composed.all('button,input,select,textarea', composed.roots(form).slice(1));
    const controls = [...new Set([...form.elements, ...inside])].slice(0, 500);
    const describe = c => [c.getAttribute('aria-label'), c.innerText, c.localName === 'input' ? c.value : '',
                           c.getAttribute('title'), ...[...(c.labels || [])].map(l => l.textContent)]
                          .map(cut).filter(Boolean);
    formRead = {
      action: form.action || location.href,
      method: (form.getAttribute('method') || 'get').toLowerCase(),
      submitters: controls.filter(isSubmit).slice(0, 10).flatMap(describe),
      checks: controls.filter(c => (c.type === 'checkbox' || c.type === 'radio') && c.required).slice(0, 20)
          .flatMap(describe),
      password: controls.some(c => c.type === 'password'),
      payment: controls.some(c => (c.getAttribute('autocomplete') || '').toLowerCase().split(/\s+/)
          .some(t => t.startsWith('cc-'))),
    };
  }
  const link = composed.closest(el, 'a[href]');
  const hover = !!composed.closest(el,
      '[onpointerover],[onpointerenter],[onmouseover],[onmouseenter],[onpointerdown],[onmousedown]');
  const pressAttr = '[onpointerdown],[onmousedown]';
  const press = el.matches(pressAttr) || !!el.querySelector(pressAttr);
  const options = tag === 'select' ? [...el.options].slice(0, 500).map(o => [cut(o.label), cut(o.value)]) : [];
  const implicit = tag === 'a' && el.hasAttribute('href') ? 'link'
      : tag === 'button' || (tag === 'input' && ['submit', 'image', 'button', 'reset'].includes(type)) ? 'button'
      : tag === 'input' && ['checkbox', 'radio'].includes(type) ? type
      : tag === 'select' ? 'combobox' : tag === 'option' ? 'option' : tag;
  return {tag, type, role: (el.getAttribute('role') || '').split(' ')[0] || implicit, labels, visible, commitsForm,
          form: formRead, href: link ? link.href : '', hover, press, options, textEntry, origin: location.origin};
}
"""
)

BY_ROLE_AND_NAME = (
    "((role, name, limit) => {"
    + COMPOSED
    + r"""
  const loose = s => (s || '').replace(/[\p{Cf}\s]/gu, '').toLowerCase();
  const implicit = {
    button: 'button,input[type=button],input[type=submit],input[type=reset],input[type=image]',
    link: 'a[href],area[href]', checkbox: 'input[type=checkbox]', radio: 'input[type=radio]',
    textbox: 'textarea,input:not([type]),input[type=text],input[type=email],input[type=tel],input[type=url],' +
             'input[type=password],input[type=number]',
    searchbox: 'input[type=search]', combobox: 'select', listbox: 'select[multiple],select[size]', option: 'option',
    slider: 'input[type=range]', spinbutton: 'input[type=number]',
  };
  const selector = `[role~="${CSS.escape(role)}"]` + (implicit[role] ? ',' + implicit[role] : '');
  const nameOf = el => {
    const root = el.getRootNode();
    const byIds = (el.getAttribute('aria-labelledby') || '').split(/\s+/).filter(Boolean)
        .map(id => ((root.getElementById ? root.getElementById(id) : null) || {}).textContent || '').join(' ');
    return el.getAttribute('aria-label') || byIds || [...(el.labels || [])].map(l => l.textContent).join(' ')
        || composed.text(el, 300) || el.value || el.getAttribute('alt') || el.getAttribute('title')
        || el.getAttribute('placeholder') || '';
  };
  const wanted = loose(name), found = [];
  for (const el of composed.all(selector)) {
    if (loose(nameOf(el)) === wanted) found.push(el);
    if (found.length >= limit) break;
  }
  return found;
})
"""
)

FOCUSED = r"""
(() => {
  let el = document.activeElement;
  for (let i = 0; el && i < 64; i++) {
    if (el.shadowRoot && el.shadowRoot.activeElement) { el = el.shadowRoot.activeElement; continue; }
    if (el.localName === 'iframe' || el.localName === 'frame') {
      let inner = null;
      try { inner = el.contentDocument && el.contentDocument.activeElement; } catch (e) {}
      if (inner) { el = inner; continue; }
    }
    break;
  }
  return el && el !== document.body && el !== document.documentElement ? el : null;
})()
"""

AT_POINT = (
    "((x, y) => {"
    + COMPOSED
    + r"""
  let doc = document, el = document.elementFromPoint(x, y);
  for (let i = 0; el && i < 64; i++) {
    if (el.shadowRoot) {
      const inner = el.shadowRoot.elementFromPoint(x, y);
      if (inner && inner !== el) { el = inner; continue; }
    }
    if (el.localName === 'iframe' || el.localName === 'frame') {
      let inner = null;
      try { inner = el.contentDocument; } catch (e) {}
      if (inner) {
        const box = el.getBoundingClientRect();
        x -= box.left + el.clientLeft; y -= box.top + el.clientTop;
        el = inner.elementFromPoint(x, y);
        continue;
      }
    }
    break;
  }
  if (!el) return null;
  // The control it is part of, past the shadow boundary: a web component's inner part activates its host.
  const control = composed.closest(el,
      'button,a[href],input,select,textarea,summary,label,[role],[onclick],[tabindex]');
  return control || el;
})
"""
)


@dataclass(frozen=True)
class FormRead:
    action: str
    method: str
    submitters: tuple[str, ...]
    checks: tuple[str, ...]
    """Labels of the form's required checkboxes and radios: a required consent box says what the submit agrees to."""
    password: bool
    payment: bool


@dataclass(frozen=True)
class Target:
    """One live element a write would go through, as the runtime read it a moment before the input."""

    frame: FrameContext
    role: str
    names: tuple[str, ...]
    """Every name the element carries: the browser's accessible name, aria-label, labels, title, alt, value."""
    visible: str
    commits_form: bool
    form: FormRead | None
    href: str
    listens_pointer: bool
    """It (or an ancestor) reacts to hover or press: what it says may change under the pointer."""
    listens_press: bool = False
    """It reacts to the press itself (a `pointerdown`/`mousedown` listener on it, or a handler attribute on it or
    inside it): what it says may change between the press and the release, after the runtime read it."""
    options: tuple[tuple[str, str], ...] = ()
    text_entry: bool = False
    frame_origin: str = ""
    iframe_frame_id: str | None = None
    """Set when the element is the frame element of an out-of-process frame (a point over another site's iframe)."""
    accessible_name: str = ""
    object_id: str = ""
    """The element's remote object in the probe's world of `frame` (for `holds_focus`)."""


@dataclass
class CommitTargets:
    """The elements an act would commit through. `found` is False when a ref's element is no longer on the Page as
    the frame showed it (renamed, removed, or changed role): the frame is stale for this act."""

    targets: list[Target] = field(default_factory=list)
    found: bool = True
    hover_unread: bool = False
    """A click read with the pointer not yet on it (a hidden Page, runtime/pointer.py): what the pointer's arrival
    changes was not seen."""


def mode_of(action: Action) -> str | None:
    """How an act activates its element, for the read; None for an act that commits nothing by itself."""
    if action.type == "click":
        return "click"
    if action.type == "select":
        return "select"
    if action.type == "type":
        return "submit" if action.submit else "type"
    if action.type == "press":
        key = (action.key or "").rsplit("+", 1)[-1].strip().lower() if action.key != "+" else "+"
        if key in ("enter", "numpadenter", "return"):
            return "enter"
        if key in (" ", "space", "spacebar") or action.key == " ":
            return "space"
    return None


async def read_commit(
    probe: PageProbe,
    action: Action,
    element: Element | None,
    frames: list[FrameContext],
    top_named: list[dict[str, Any]] | None = None,
) -> CommitTargets:
    """The live elements `action` would go through, in the Page's `frames` (read once per write, shared with the
    structure read); an empty reading for acts that commit nothing. `top_named`: the top document's live elements
    with the element's role and name when the caller has just read them (the pointer, once the Page answered it),
    so the top document's accessibility tree is not asked again, a rendering update later."""
    mode = mode_of(action)
    if mode is None:
        return CommitTargets()
    if not frames:
        return CommitTargets(found=False)
    if action.type == "press":
        found = await probe.evaluate_in(frames[0], FOCUSED, by_value=False)
        return CommitTargets(await _reads(probe, frames[0], [found], mode))
    if action.is_point:
        expression = f"({AT_POINT})({json.dumps(action.x)}, {json.dumps(action.y)})"
        found = await probe.evaluate_in(frames[0], expression, by_value=False)
        return CommitTargets(await _reads(probe, frames[0], [found], mode))
    if element is None:
        return CommitTargets()
    targets: list[Target] = []
    for frame in frames:
        named = top_named if frame.top and top_named is not None else await live(probe, frame, element)
        targets += await _reads(probe, frame, named, mode)
        if len(targets) >= MAX_CANDIDATES:
            break
    return CommitTargets(targets, found=bool(targets))


async def live(probe: PageProbe, frame: FrameContext, element: Element) -> list[dict[str, Any]]:
    """The frame's live elements with the frame element's role and name, as remote objects in the probe's world.

    Other frames than the top by their DOM: an offscreen frame of another site is throttled, and its accessibility
    tree would not answer before `AX_WAIT` on every act."""
    return await (_by_role_and_name(probe, frame, element) if frame.top else _by_dom(probe, frame, element))


async def aim(probe: PageProbe, frame: FrameContext, element: Element) -> list[dict[str, Any]]:
    """Where the element may be, to aim the pointer at before the Page is read: the frame's DOM searched by role and
    the simple name (it answers at once), else the accessibility tree (it waits for a rendering update). Only the
    aim: what the write goes through is read by `live` once the pointer is there."""
    return await _by_dom(probe, frame, element) or await live(probe, frame, element)


async def _by_role_and_name(probe: PageProbe, frame: FrameContext, element: Element) -> list[dict[str, Any]]:
    """The frame's live elements with the element's role and name (whitespace and case aside).

    The browser's accessibility tree first, by every Chromium role the element's role word covers (a `textbox` may
    be a date field, `runtime/roles.py`). It answers only once the frame's rendering is up to date, which a
    minimized window may never be: after `AX_WAIT` the frame's DOM is searched instead, with the name computed the
    simple way (aria-label, labelledby, labels, content, value, alt, title, placeholder)."""
    queries = [probe.query_ax(frame, role) for role in sorted(chromium_roles(element.role))]
    try:
        found = await asyncio.wait_for(asyncio.gather(*queries), AX_WAIT)
    except TimeoutError:
        return await _by_dom(probe, frame, element)
    except CDPError:
        return []
    wanted = loose(element.name)
    matching = [
        (node["backendDOMNodeId"], name)
        for nodes in found
        for node in nodes
        if not node.get("ignored")
        and "backendDOMNodeId" in node
        and loose(name := str((node.get("name") or {}).get("value", ""))) == wanted
    ][:MAX_CANDIDATES]

    async def resolve(backend_node_id: int, name: str) -> dict[str, Any] | None:
        params = {"backendNodeId": backend_node_id, "executionContextId": frame.world}
        try:
            resolved = await probe.send_in(frame, "DOM.resolveNode", params)
        except CDPError:
            return None  # a node gone since the query
        return {**resolved["object"], "accessibleName": name, "role": element.role}

    # Sent together: the session answers in order, and the reads wait on the browser, not on each other.
    resolved = await asyncio.gather(*(resolve(*match) for match in matching))
    return [remote for remote in resolved if remote is not None]


async def _by_dom(probe: PageProbe, frame: FrameContext, element: Element) -> list[dict[str, Any]]:
    expression = f"({BY_ROLE_AND_NAME})({json.dumps(element.role)}, {json.dumps(element.name)}, {MAX_CANDIDATES})"
    try:
        found = await probe.evaluate_in(frame, expression, by_value=False)
        listing = await probe.send_in(
            frame, "Runtime.getProperties", {"objectId": found["objectId"], "ownProperties": True}
        )
    except (CDPError, KeyError):
        return []
    return [
        {**prop["value"], "accessibleName": element.name, "role": element.role}
        for prop in listing.get("result", [])
        if prop.get("name", "").isdigit() and prop.get("value", {}).get("objectId")
    ]


def loose(name: str) -> str:
    """A name as two computations of it may differ: whitespace (all of it: the browser's accessibility tree puts a
    space at each `<wbr>` of `/api<wbr>/orders` where Playwright puts none), case, and invisible format characters
    (an upstream may drop a zero-width space or a bidi mark that the browser keeps)."""
    return "".join(c for c in name if unicodedata.category(c) != "Cf" and not c.isspace()).casefold()


async def _reads(probe: PageProbe, frame: FrameContext, remotes: list[dict[str, Any]], mode: str) -> list[Target]:
    """The live elements read, in the order found (each read sent at once: they wait on the browser only)."""
    found = [remote for remote in remotes if remote and remote.get("objectId")]
    return list(await asyncio.gather(*(_read(probe, frame, remote, mode) for remote in found)))


async def _read(probe: PageProbe, frame: FrameContext, remote: dict[str, Any], mode: str) -> Target:
    object_id = remote["objectId"]
    raw, listeners = await asyncio.gather(
        probe.call_on(frame, object_id, READ_ELEMENT, mode), _listeners(probe, frame, object_id)
    )
    child_frame = None
    if raw["tag"] in ("iframe", "frame"):
        described = await probe.send_in(frame, "DOM.describeNode", {"objectId": object_id})
        child_frame = described["node"].get("frameId")
    form = raw["form"]
    name = remote.get("accessibleName", "")
    change_submits = mode == "select" and bool(form) and bool(CHANGE_EVENTS & listeners)
    return Target(
        frame=frame,
        role=remote.get("role") or raw["role"],
        names=tuple(n for n in (name, *raw["labels"]) if n),
        visible=raw["visible"],
        commits_form=raw["commitsForm"] or change_submits,
        form=FormRead(
            form["action"],
            form["method"],
            tuple(form["submitters"]),
            tuple(form["checks"]),
            form["password"],
            form["payment"],
        )
        if form
        else None,
        href=raw["href"],
        listens_pointer=raw["hover"] or bool(HOVER_EVENTS & listeners),
        listens_press=raw["press"] or bool(PRESS_EVENTS & listeners),
        options=tuple((label, value) for label, value in raw["options"]),
        text_entry=raw["textEntry"],
        frame_origin=raw["origin"],
        iframe_frame_id=child_frame,
        accessible_name=name,
        object_id=object_id,
    )


async def holds_focus(probe: PageProbe, reading: CommitTargets) -> bool:
    """Whether the Page's focused element (through open shadow roots and same-origin frames) is one of the live
    elements `reading` found: a key pressed now goes there (every backend presses keys on the focused element).

    Compared by the browser's node id, not by role and name: a Page can move the focus to a field named like the
    one typed into. Elements in another process (an out-of-process frame) never match: the top document's focus
    walk stops at their frame element (and another site's form is the user's anyway)."""
    top = await probe.frames()
    if not top or not top[0].top:
        return False
    focused = await probe.evaluate_in(top[0], FOCUSED, by_value=False)
    candidates = [t for t in reading.targets if t.object_id and t.frame.session == top[0].session]
    if not focused.get("objectId") or not candidates:
        return False

    async def node(frame: FrameContext, object_id: str) -> int | None:
        try:
            return (await probe.send_in(frame, "DOM.describeNode", {"objectId": object_id}))["node"]["backendNodeId"]
        except (CDPError, KeyError):
            return None  # an element gone since the read (its document too, maybe)

    # Sent together: they only read, and each waits on the browser.
    ids = await asyncio.gather(node(top[0], focused["objectId"]), *(node(t.frame, t.object_id) for t in candidates))
    return ids[0] is not None and ids[0] in ids[1:]


async def _listeners(probe: PageProbe, frame: FrameContext, object_id: str) -> set[str]:
    """Event types the element itself listens for (page scripts' listeners included, which the page's own JS
    cannot hide from CDP).

    Asked of the node as the page's own world holds it: Chromium lists only the listeners of the world the object
    lives in, and the probe's isolated world has none."""
    try:
        node = (await probe.send_in(frame, "DOM.describeNode", {"objectId": object_id}))["node"]
        page_side = (await probe.send_in(frame, "DOM.resolveNode", {"backendNodeId": node["backendNodeId"]}))["object"]
    except (CDPError, KeyError):
        return set()
    try:
        found = await probe.send_in(frame, "DOMDebugger.getEventListeners", {"objectId": page_side["objectId"]})
    except CDPError:
        return set()
    finally:
        with contextlib.suppress(CDPError):
            await probe.send_in(frame, "Runtime.releaseObject", {"objectId": page_side["objectId"]})
    return {listener.get("type", "") for listener in found.get("listeners", [])}
