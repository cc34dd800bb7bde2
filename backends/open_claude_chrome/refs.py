"""Refs with identity: `ref_N` names one DOM element as it was when the agent was shown it, and is re-checked
against the live page before anything is done with it.

An identity is (frame, the document that frame showed — its loader id —, the element's backend node id, its position
in the flat tree — element-sibling indexes from <html> down, through shadow roots and slots as the page is drawn —,
and its signature: tag, identifying attributes, the text it draws). Before acting, the adapter resolves the backend
node id in an isolated world (page scripts cannot redefine what the check calls) and the check computes position and
signature in the page the way `accessibility.DomDocument` computed them from the snapshot, in the same call that
then locates the element. Anything that differs — another document, the node removed or replaced, the node moved (a
re-sorted list, another shadow host), its content changed — is a stale ref: `BackendError(Failure.stale, "…")`, and
no input is sent. Coordinates are never remembered and replayed: the point is computed, and hit-tested, at the
moment of acting (for an element in a cross-site iframe, in its own renderer, then carried up through each
<iframe>'s box, which must itself be what lies at that point). What is hit there is the element's if the element
(or one of its labels) is on the click's event path: a custom element that draws itself in its own shadow root (a
toggle's track, an option's text through its own slot) is hit as that part; another element drawn over it is not.

Why the flat tree: the DOM snapshot a ref is minted from walks it (a shadow root is no node of the snapshot; its
children hang under the host, a slotted element under its slot), so a position counted in the DOM tree could never
be matched for an element inside a shadow root. Open shadow roots, nested or not, are read like the light DOM; a
closed one's text is left out on both sides (the check cannot read it), and an element slotted into a closed shadow
root cannot be placed by the check (`assignedSlot` hides it), so a ref to it is refused as stale, never guessed.

Numbering is stable while the element is: the same (frame, document, node) keeps its ref across reads, so an
agent's ref from one read still names the same element in the next.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from backends.open_claude_chrome.accessibility import SIGNATURE_ATTRS, SIGNATURE_TEXT, AXItem, DomFacts, PageRead
from backends.open_claude_chrome.session import PageSession, ProtocolError
from runtime.backend import BackendError, Failure

REF = re.compile(r"^ref_(\d+)$")
"""The contract's ref syntax. Nothing else ever addresses an element: no selectors, no XPath."""

WORLD_NAME = "computer_use_open_claude_chrome"

Mode = Literal["point", "click", "text", "select", "check", "scroll"]


@dataclass(frozen=True)
class Identity:
    frame_id: str
    loader_id: str
    backend_id: int
    path: tuple[int, ...]
    signature: str
    role: str
    name: str
    centre: tuple[float, float] | None
    """Where its box's centre was at the read (viewport CSS px). Shown in messages; never clicked."""


class RefTable:
    """ref ↔ identity, as of the reads the agent was shown."""

    def __init__(self) -> None:
        self._next = 1
        self._refs: dict[tuple[str, str, int], str] = {}
        self._identities: dict[str, Identity] = {}

    def assign(self, read: PageRead, item: AXItem, facts: DomFacts) -> str:
        assert item.backend_id is not None
        loader = read.loaders.get(item.frame_id, "")
        key = (item.frame_id, loader, item.backend_id)
        ref = self._refs.get(key)
        if ref is None:
            ref = self._refs[key] = f"ref_{self._next}"
            self._next += 1
        self._identities[ref] = Identity(
            item.frame_id, loader, item.backend_id, facts.path, facts.signature, item.role, item.name, facts.centre
        )
        return ref

    def prune(self, read: PageRead) -> None:
        """Forget refs of documents that are gone and of nodes this (full) read no longer has."""
        present = {(i.frame_id, i.backend_id) for i in read.items() if i.backend_id is not None}
        for key, ref in list(self._refs.items()):
            frame_id, loader, backend_id = key
            if read.loaders.get(frame_id) != loader or (frame_id, backend_id) not in present:
                del self._refs[key]
                self._identities.pop(ref, None)

    def get(self, ref: str) -> Identity:
        if not REF.fullmatch(ref or ""):
            raise BackendError(Failure.element, f"not a ref of this backend: {ref!r} (refs look like ref_12)")
        identity = self._identities.get(ref)
        if identity is None:
            raise BackendError(Failure.stale, f"{ref} is not in the latest read_page or find result")
        return identity

    def __len__(self) -> int:
        return len(self._identities)


# The check, run with `this` = the element the backend node id resolves to, in the adapter's isolated world.
# Arguments: the expected [path, signature], the mode, and the mode's argument. It answers
# {stale: why} | {refused: why} | {x, y, ...} (viewport CSS px of the main frame).
CHECK_JS = r"""
function (expected, mode, arg) {
  const el = this;
  const describe = n => {
    if (!n) return 'nothing';
    if (n.nodeType !== 1) return n.nodeName;
    const label = n.getAttribute('aria-label');
    return n.localName + (n.id ? '#' + n.id : '') + (label ? '[' + label + ']' : '');
  };
  if (!el.isConnected) return {stale: 'it was removed from the page (replaced or re-rendered)'};
  // Its place in the flat tree, as the snapshot it was read from walks it: a shadow root's children sit under its
  // host, a slotted element under its slot; a host's unslotted child and a slot's unused fallback are not drawn.
  const path = [];
  for (let node = el; ; ) {
    const parent = node.parentNode;
    if (!parent || parent.nodeType === 9) break;
    let flat, siblings;
    if (parent.nodeType === 11) {
      flat = parent.host;
      siblings = parent.children;
    } else if (node.assignedSlot) {
      flat = node.assignedSlot;
      siblings = flat.assignedElements();
    } else if (parent.shadowRoot || (parent.assignedNodes && parent.assignedNodes().length)) {
      return {stale: 'it is no longer drawn (outside every slot of its shadow host)'};
    } else {
      flat = parent;
      siblings = parent.children;
    }
    if (!flat) break;
    path.push(Array.prototype.indexOf.call(siblings, node));
    node = flat;
  }
  path.reverse();
  // Its text as drawn: open shadow content and slotted content in flat-tree order; a closed root's text is out of
  // reach here, and the snapshot's side leaves it out too.
  let text = '';
  const stack = [el];
  while (stack.length && text.length < SIGNATURE_TEXT) {
    const node = stack.pop();
    if (node.nodeType === 3 || node.nodeType === 4) {
      const root = node.getRootNode();
      if (!(root.nodeType === 11 && root.mode === 'closed')) text += node.data.replace(/\s+/g, '');
      continue;
    }
    let kids = node.childNodes;
    if (node.shadowRoot) kids = node.shadowRoot.childNodes;
    else if (node.assignedNodes && node.assignedNodes().length) kids = node.assignedNodes();
    for (let k = kids.length - 1; k >= 0; k--) stack.push(kids[k]);
  }
  text = text.slice(0, SIGNATURE_TEXT);
  const attr = n => el.getAttribute(n) || '';
  const signature = [el.localName.toLowerCase(), ...SIGNATURE_ATTRS.map(attr), text].join('|');
  if (JSON.stringify(path) !== JSON.stringify(expected[0]))
    return {stale: 'it moved in the page (its position in the document changed)'};
  if (signature !== expected[1])
    return {stale: 'it changed (its text or identifying attributes differ)'};

  const win = el.ownerDocument.defaultView;
  // Same-process frames add their offsets here; at a cross-process boundary (no frameElement) the caller adds the
  // rest from the parent renderer (`remote`).
  let ox = 0, oy = 0, remote = false;
  for (let w = win; w !== w.top; w = w.parent) {
    const frame = w.frameElement;
    if (!frame) { remote = true; break; }
    const r = frame.getBoundingClientRect();
    ox += r.left + frame.clientLeft;
    oy += r.top + frame.clientTop;
  }
  const box = () => {
    const vw = win.innerWidth, vh = win.innerHeight;
    for (const r of el.getClientRects()) {
      const left = Math.max(r.left, 0), top = Math.max(r.top, 0);
      const right = Math.min(r.right, vw), bottom = Math.min(r.bottom, vh);
      if (right - left >= 1 && bottom - top >= 1)
        return {x: (left + right) / 2, y: (top + bottom) / 2,
                left: r.left, top: r.top, width: r.width, height: r.height};
    }
    return null;
  };
  const locate = () => {
    let b = box();
    if (!b) {
      el.scrollIntoView({block: 'center', inline: 'center', behavior: 'instant'});
      b = box();
    }
    return b;
  };
  const answer = (b, extra) => Object.assign({x: b.x + ox, y: b.y + oy, left: b.left + ox, top: b.top + oy,
                                              width: b.width, height: b.height, remote}, extra || {});

  if (mode === 'scroll') {
    el.scrollIntoView({block: 'center', inline: 'nearest', behavior: 'instant'});
    const b = box();
    return b ? answer(b) : {refused: 'it has no box on screen (hidden or empty)'};
  }
  if (mode === 'point' || mode === 'click') {
    // A click on a disabled control does nothing in the page; say so, as Playwright's and Puppeteer's locators do.
    if (mode === 'click' && (el.disabled === true || el.getAttribute('aria-disabled') === 'true')) {
      return {refused: 'it is disabled'};
    }
    const b = locate();
    if (!b) return {refused: 'it has no box on screen (hidden or empty)'};
    let hit = el.ownerDocument.elementFromPoint(b.x, b.y);
    while (hit && hit.shadowRoot) {
      const inner = hit.shadowRoot.elementFromPoint(b.x, b.y);
      if (!inner || inner === hit) break;
      hit = inner;
    }
    // The press is the element's if the element, or one of its labels, is on the press's event path: up from what
    // is hit through slots and shadow roots, as the click bubbles. A custom element draws itself in its own shadow
    // root (a toggle's track, an option's label slot): that part is hit, and the click is still the element's.
    const labels = el.labels ? Array.from(el.labels) : [];
    let ours = false;
    for (let n = hit; n && !ours; ) {
      ours = n === el || labels.includes(n);
      const up = n.assignedSlot || n.parentNode;
      n = up && up.nodeType === 11 ? up.host : up;
    }
    if (!ours) return {refused: 'another element (' + describe(hit) + ') is on top of it at its centre'};
    return answer(b);
  }
  if (mode === 'text') {
    const tag = el.localName;
    const textTypes = ['text', 'search', 'email', 'url', 'tel', 'password', 'number', ''];
    const type = (el.getAttribute('type') || '').toLowerCase();
    const field = tag === 'textarea' || (tag === 'input' && textTypes.includes(type));
    // A date, time, colour or range field takes no typed text (its parts are spin buttons): it takes the value the
    // way a select takes an option, as Playwright's and Puppeteer's fill do, if the field accepts it as written.
    const pickers = ['date', 'time', 'datetime-local', 'month', 'week', 'color', 'range'];
    const picked = tag === 'input' && pickers.includes(type);
    if (!field && !picked && !el.isContentEditable) return {refused: 'it is not a text field (' + describe(el) + ')'};
    if (el.disabled) return {refused: 'the field is disabled'};
    if (el.readOnly) return {refused: 'the field is read-only'};
    if (picked) {
      const want = String(arg);
      const trial = el.ownerDocument.createElement('input');
      trial.type = type;
      trial.value = want;
      if (trial.value !== want) {
        const hint = type === 'date' ? ' (write a date as 2026-12-24)' : '';
        return {refused: 'a ' + type + ' field does not take ' + JSON.stringify(want.slice(0, 40)) + hint};
      }
      el.focus();
      el.value = want;
      el.dispatchEvent(new Event('input', {bubbles: true, composed: true}));
      el.dispatchEvent(new Event('change', {bubbles: true}));
      const b = box();
      return b ? answer(b, {value_set: true}) : {x: null, y: null, remote, value_set: true};
    }
    el.focus();
    const doc = el.ownerDocument;
    let active = doc.activeElement;
    while (active && active.shadowRoot && active.shadowRoot.activeElement) active = active.shadowRoot.activeElement;
    if (active !== el && !el.contains(active)) return {refused: 'the field did not take focus'};
    if (field) {
      el.select();
    } else {
      const range = doc.createRange();
      range.selectNodeContents(el);
      const selection = win.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
    }
    const b = box();
    const had = field ? el.value !== '' : (el.textContent || '') !== '';
    return b ? answer(b, {had_value: had}) : {x: null, y: null, remote, had_value: had};
  }
  if (mode === 'select') {
    if (el.localName !== 'select') return {refused: 'it is not a select (' + describe(el) + ')'};
    if (el.disabled) return {refused: 'the select is disabled'};
    const options = Array.from(el.options);
    const want = String(arg);
    const norm = s => s.replace(/\s+/g, ' ').trim();
    const option = options.find(o => o.value === want) || options.find(o => norm(o.label) === norm(want))
        || options.find(o => norm(o.label).toLowerCase() === norm(want).toLowerCase());
    if (!option) return {refused: 'no option ' + JSON.stringify(want) + '; options: '
                         + options.slice(0, 12).map(o => JSON.stringify(norm(o.label))).join(', ')};
    if (option.disabled) return {refused: 'the option ' + JSON.stringify(norm(option.label)) + ' is disabled'};
    option.selected = true;
    el.dispatchEvent(new Event('input', {bubbles: true, composed: true}));
    el.dispatchEvent(new Event('change', {bubbles: true}));
    const b = box();
    return b ? answer(b, {selected: norm(option.label)}) : {x: null, y: null, remote, selected: norm(option.label)};
  }
  if (mode === 'check') {
    const type = (el.getAttribute('type') || '').toLowerCase();
    if (el.localName !== 'input' || (type !== 'checkbox' && type !== 'radio'))
      return {refused: 'a boolean value is for checkboxes and radio buttons, not ' + describe(el)};
    if (el.disabled) return {refused: 'it is disabled'};
    if (type === 'radio' && arg === false && el.checked)
      return {refused: 'a radio button is cleared by choosing another one'};
    if (el.checked !== arg) el.click();
    const b = box();
    return b ? answer(b, {checked: el.checked}) : {x: null, y: null, remote, checked: el.checked};
  }
  return {refused: 'unknown mode ' + mode};
}
"""


CHECK_SOURCE = CHECK_JS.replace("SIGNATURE_TEXT", str(SIGNATURE_TEXT)).replace(
    "SIGNATURE_ATTRS", json.dumps(list(SIGNATURE_ATTRS))
)


class IsolatedWorlds:
    """One isolated world per (frame, document): page scripts share the DOM with it but not its JavaScript."""

    def __init__(self, session: PageSession) -> None:
        self.session = session
        self._contexts: dict[tuple[str, str], int] = {}

    async def context(self, frame_id: str, loader_id: str) -> int:
        key = (frame_id, loader_id)
        if key not in self._contexts:
            created = await self.session.send(
                "Page.createIsolatedWorld",
                {"frameId": frame_id, "worldName": WORLD_NAME, "grantUniveralAccess": False},
                session=self.session.session_of(frame_id),
            )
            self._contexts = {k: v for k, v in self._contexts.items() if k[0] != frame_id}
            self._contexts[key] = created["executionContextId"]
        return self._contexts[key]


async def recheck(
    session: PageSession, worlds: IsolatedWorlds, ref: str, identity: Identity, mode: Mode, arg: Any = None
) -> dict[str, Any]:
    """Re-check `identity` on the live page and, if it still holds, do the mode's in-page part; return the answer
    with `x`/`y` in the page's viewport (CSS px).

    Raises BackendError(Failure.stale) for a stale ref, or BackendError(Failure.element) for an element
    that cannot take the action. Two calls (`DOM.resolveNode`, one `Runtime.callFunctionOn`) on the renderer that
    holds the element; for an element in an out-of-process iframe, the iframe's place in its parent is read too."""
    state = session.frames.get(identity.frame_id)
    if state is None or state.loader_id != identity.loader_id:
        raise BackendError(Failure.stale, f"{ref} belongs to a document the page no longer shows")
    target = session.session_of(identity.frame_id)
    context = await worlds.context(identity.frame_id, identity.loader_id)
    try:
        resolved = await session.send(
            "DOM.resolveNode", {"backendNodeId": identity.backend_id, "executionContextId": context}, session=target
        )
    except ProtocolError:
        raise BackendError(Failure.stale, f"{ref} ({_label(identity)}) is gone from the page") from None
    try:
        answer = await session.send(
            "Runtime.callFunctionOn",
            {
                "functionDeclaration": CHECK_SOURCE,
                "objectId": resolved["object"]["objectId"],
                "arguments": [{"value": [list(identity.path), identity.signature]}, {"value": mode}, {"value": arg}],
                "returnByValue": True,
            },
            session=target,
        )
    except ProtocolError as exc:
        # The document went away under the call (a navigation between the two calls).
        raise BackendError(Failure.stale, f"{ref} could not be checked: {exc.message}") from None
    if "exceptionDetails" in answer:
        detail = answer["exceptionDetails"].get("exception", {}).get("description") or answer["exceptionDetails"]
        raise BackendError(Failure.upstream, f"the ref check failed in the page: {str(detail)[:200]}")
    value: dict[str, Any] = answer.get("result", {}).get("value") or {}
    if "stale" in value:
        why = value["stale"]
        raise BackendError(Failure.stale, f"{ref} ({_label(identity)}) no longer matches: {why}")
    if "refused" in value:
        raise BackendError(Failure.element, f"{ref} ({_label(identity)}): {value['refused']}")
    if value.get("remote") and value.get("x") is not None:
        x, y = await _into_page(session, target, (value["x"], value["y"]), ref, hit_test=mode in ("point", "scroll"))
        value["x"], value["y"] = x, y
    return value


async def _into_page(
    session: PageSession, renderer: str, point: tuple[float, float], ref: str, *, hit_test: bool
) -> tuple[float, float]:
    """Carry a point from an out-of-process iframe's viewport up to the page's: at each level add the offset of
    the <iframe>'s content box in its parent and (for a click) check that the <iframe> is what is there."""
    x, y = point
    while renderer != session.session_id:
        child = session.children.get(renderer)
        if child is None:
            raise BackendError(Failure.stale, f"the frame that holds {ref} is gone")
        try:
            owner = (
                await session.send("DOM.getFrameOwner", {"frameId": child.frame_id}, session=child.parent_session)
            )["backendNodeId"]
            if hit_test:
                await session.send("DOM.scrollIntoViewIfNeeded", {"backendNodeId": owner}, session=child.parent_session)
            model = (await session.send("DOM.getBoxModel", {"backendNodeId": owner}, session=child.parent_session))[
                "model"
            ]
            x, y = x + model["content"][0], y + model["content"][1]
            if hit_test:
                hit = await session.send(
                    "DOM.getNodeForLocation",
                    {"x": int(x), "y": int(y), "ignorePointerEventsNone": True},
                    session=child.parent_session,
                )
                if hit.get("backendNodeId") != owner:
                    raise BackendError(Failure.element, f"{ref}: another element is on top of the frame that holds it")
        except ProtocolError as exc:
            raise BackendError(Failure.stale, f"the frame that holds {ref} moved away: {exc}") from None
        renderer = child.parent_session
    return x, y


def _label(identity: Identity) -> str:
    return f'{identity.role} "{identity.name[:40]}"' if identity.name else identity.role
