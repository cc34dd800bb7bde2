"""Deliberately broken runtimes for the negative controls, assembled from outside the runtime.

A release proof must be able to fail: each of its negative controls runs the same check against a runtime that
does exactly what the proof forbids. The runtime holds no switch for that (`runtime/` and `backends/` contain no
test-only code, `suites/unit/test_dependencies.py` checks it); the broken part is built here and handed to the
runtime through its named seams: the service's `Parts` (`runtime/service.py`: a verifier, a session manager, a
command with one public seam overridden, a pointer, a hover wait, a focus check), the gateway factory, the MCP
server's tool table, a backend factory. None overrides a private method of the runtime (`suites/lab/test_seams.py`).

`@pytest.mark.sabotage("name")` on a test picks one of `SABOTAGE` for its `runtime` fixture (`suites/conftest.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from backends.chrome_devtools_mcp.adapter import ChromeDevToolsMCPBackend
from backends.open_claude_chrome import refs
from backends.open_claude_chrome.adapter import OpenClaudeChromeBackend
from backends.open_claude_chrome.contract import ToolContract
from backends.open_claude_chrome.refs import Identity, Mode
from backends.playwright_mcp.adapter import PlaywrightMCPBackend
from runtime.arguments import ComputerUseArgs
from runtime.backend import BackendError, Element, Failure
from runtime.capability.contexts import ContextStore, PageContext
from runtime.capability.verifier import CapabilityVerifier
from runtime.commands.act import Act
from runtime.commands.base import Answer
from runtime.commands.observe import Observe
from runtime.commands.verify import Verify
from runtime.computer_session import ComputerSession, Frame
from runtime.gateway import ScopedGateway
from runtime.gateway.allowlist import FORWARD, Verdict
from runtime.gateway.scope import TargetScope
from runtime.models import Action, Page
from runtime.pointer import Pointed, Rest, move_pointer, rest_on
from runtime.reading.commit import CommitTargets, aim
from runtime.reading.probe import FrameContext, PageProbe
from runtime.reasons import ReasonCode, Refusal
from runtime.registry.pages import PageRegistry
from runtime.scope import Scope
from runtime.service import Parts
from runtime.sessions import BackendFactory, SessionManager
from runtime.transports.mcp.server import ComputerUseServer


class TrustingVerifier(CapabilityVerifier):
    """Checks no token: every call gets the (only) host's current Page Context (the isolation proof's token
    control)."""

    def __init__(self, store: ContextStore, registry: PageRegistry) -> None:
        super().__init__(store, registry)
        self.store = store

    def verify(self, meta: Mapping[str, Any] | None, connection: object) -> PageContext:
        return next(iter(self.store.contexts.values()))


class ScreenshotAlways(Observe):
    """Takes a screenshot on every observation, whatever the detail asked for (the zero-screenshot control)."""

    async def frame(
        self,
        session: ComputerSession,
        detail: str,
        context: PageContext,
        since: Frame | None = None,
        scope: Scope | None = None,
    ) -> Answer:
        return await super().frame(session, "visual", context, since, scope)


class NoPolicy(Act):
    """Sends every write without the runtime's policy read (no `needs_user` for login, CAPTCHA, payment...)."""

    async def check_policy(self, *args: Any) -> CommitTargets:
        return CommitTargets()


class PolicyWithoutSubmit(Act):
    """Reads the policy of a `type` with `submit` as a plain `type` (the field alone, not the form Enter submits)."""

    async def check_policy(
        self, session: ComputerSession, action: Action, element: Element | None, context: PageContext
    ) -> CommitTargets:
        return await super().check_policy(session, action.model_copy(update={"submit": False}), element, context)


async def focus_always_held(probe: PageProbe, reading: CommitTargets) -> bool:
    """Says the field typed into still has the focus without looking: the runtime's Enter of a `type` with `submit`
    goes wherever the focus is."""
    return True


class SubmitTwice(Act):
    """Sends the submit of a `type` with `submit` twice: the backend's one call that types and submits, or the
    runtime's own Enter (a second Enter is a second submit)."""

    async def send(self, session: ComputerSession, action: Action, element: Element | None) -> None:
        await super().send(session, action, element)
        if (action.type == "type" and action.submit) or (action.type == "press" and action.key == "Enter"):
            await super().send(session, action, element)


async def hover_unanswered(probe: PageProbe) -> None:
    """Reads a hover's answer as soon as the backend's hover returns, before the Page has answered it (the hover
    control: a control that grows into view is not in the act's answer)."""
    return None


async def pointer_never_moves(
    probe: PageProbe, frames: list[FrameContext], action: Action, element: Element | None
) -> Pointed:
    """Judges a click on what is under its point before the pointer has moved there (the pointer-truth control):
    the backend's own move then reveals or renames the control it presses."""
    return Pointed(Rest.there)


AT_DELIVERY = """function () {
    const element = this;
    element.labNameAtDelivery = undefined;
    addEventListener("pointerover", () => { element.labNameAtDelivery = element.textContent; }, {once: true});
    return element.textContent;
}"""
"""Keeps, on the element (in the probe's own world), its text at the moment the move is delivered: the listener is
the window's, so it runs after the Page's own listeners of that event and before any frame the Page asks for."""


async def read_at_delivery(
    probe: PageProbe, frame: FrameContext, element: Element, point: tuple[float, float]
) -> list[dict[str, Any]]:
    """Reads what is under a click's pointer the moment the move is delivered, before the Page has answered it (the
    pointer-truth control for a Page that answers a frame later, as a transition library does). Read at delivery by
    a listener, not by a call sent after the move, so it is that moment on a loaded machine too."""
    named = await aim(probe, frame, element)
    if not named:
        await move_pointer(probe, frame, *point)
        return named
    kept = {"objectId": named[0]["objectId"], "functionDeclaration": AT_DELIVERY, "returnByValue": True}
    before = (await probe.send_in(frame, "Runtime.callFunctionOn", kept))["result"].get("value")
    await move_pointer(probe, frame, *point)
    read = {**kept, "functionDeclaration": "function () { return this.labNameAtDelivery; }"}
    then = (await probe.send_in(frame, "Runtime.callFunctionOn", read))["result"].get("value")
    return named if then in (None, before) else []


async def answer_unawaited(
    probe: PageProbe, frames: list[FrameContext], action: Action, element: Element | None
) -> Pointed:
    """Puts the pointer where the click presses and reads under it at the move's delivery (`read_at_delivery`)."""
    return await rest_on(probe, frames, action, element, answer=read_at_delivery)


class BringToFront(Act):
    """Raises the Page's window before each action (the no-focus proof's control)."""

    async def send(self, session: ComputerSession, action: Action, element: Element | None) -> None:
        await session.probe._send("Page.bringToFront")  # the probe's own session on the Page
        await super().send(session, action, element)


class AnswerDialogs(Act):
    """Accepts a dialog the action opened and carries on, instead of handing the Page to the user."""

    async def after(self, session: ComputerSession, context: PageContext, frame: Frame, blocked: bool) -> Answer:
        try:
            return await super().after(session, context, frame, blocked)
        except Refusal as refusal:
            if refusal.code is not ReasonCode.needs_user:
                raise
        probe = session.probe
        probe.dialog = None
        probe.dialog_open.clear()
        await probe._send("Page.handleJavaScriptDialog", {"accept": True})
        return await self.observe.frame(session, "interactive", context)


class SwitchBackendOnFailure(Act):
    """On a failed or timed-out act, starts the backend the setting names now, finds the same element there and
    sends the action again (a second click, a second submit): exactly what the backend freeze forbids."""

    async def send(self, session: ComputerSession, action: Action, element: Element | None) -> None:
        try:
            await super().send(session, action, element)
        except (TimeoutError, BackendError):
            with contextlib.suppress(Exception):
                await self.retry_elsewhere(session, action, element)
            raise

    async def retry_elsewhere(self, session: ComputerSession, action: Action, element: Element | None) -> None:
        fallback = await self.sessions.start(session.page, session.turn, self.settings.backend)
        snapshot = await asyncio.wait_for(fallback.backend.snapshot(), self.settings.observe_timeout)
        again = None
        if element is not None:
            again = next((e for e in snapshot.elements if (e.role, e.name) == (element.role, element.name)), None)
        retry = action.model_copy(update={"ref": again.ref}) if again is not None else action
        await asyncio.wait_for(fallback.backend.act(retry, again), self.settings.act_timeout)


class LightDomProbe(PageProbe):
    """Reads the Page's text as verify once did: each frame's `document.body.innerText`, which leaves out every open
    shadow root's text (and places slotted text where the light DOM has it, not where it is shown)."""

    async def text(self, limit: int = 200_000) -> str:
        light = f"(document.body ? document.body.innerText : '').slice(0, {limit})"
        parts = [await self.evaluate_in(frame, light) for frame in await self.frames()]
        return "\n".join(part or "" for part in parts)[:limit]


class LightDomVerify(Verify):
    """Checks `text_present` / `text_absent` against the light DOM's text only (the shadow DOM parity control)."""

    async def run(self, session: ComputerSession, args: ComputerUseArgs, context: PageContext) -> Answer:
        session.probe.__class__ = LightDomProbe  # the session's own probe, its text read replaced
        return await super().run(session, args, context)


class NoScope(TargetScope):
    """A scope that shows every target and forwards every command."""

    def visible(self, target_id: str | None) -> bool:
        return True

    def decide(self, *args: Any) -> Verdict:
        return FORWARD


class UnscopedGateway(ScopedGateway):
    """A gateway that shows every target and forwards every command: no scope, no refusal (its `scope` room)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs, scope=NoScope)


def expose_upstream_tool(server: ComputerUseServer) -> None:
    """Adds an upstream's tool to the runtime's MCP server (the one-tool proof's control)."""

    @server.tool(name="browser_snapshot")
    async def browser_snapshot() -> str:
        return "upstream tool exposed"


class BlindRefContract(ToolContract):
    """Clicks a ref at the point it had when it was read, without re-checking that the element is still there."""

    async def press_point(
        self, coordinate: tuple[float, float] | None, ref: str | None, mode: Mode = "point"
    ) -> tuple[float, float]:
        if coordinate is None and ref is not None:
            identity = self.refs.get(ref)
            if identity.centre is None:
                raise BackendError(Failure.element, f"{ref} had no box")
            return identity.centre
        return await super().press_point(coordinate, ref, mode)


LIGHT_DOM_PLACE = r"""
  const path = [];
  for (let node = el; ; ) {
    const parent = node.parentNode;
    if (!parent || parent.nodeType === 9) break;
    if (parent.nodeType === 11) {
      path.push(-1);
      node = parent.host;
      if (!node) break;
      continue;
    }
    let i = 0;
    for (let s = node.previousElementSibling; s; s = s.previousElementSibling) i++;
    path.push(i);
    node = parent;
  }
  path.reverse();
  const text = (el.textContent || '').replace(/\s+/g, '').slice(0, SIGNATURE_TEXT);
"""
"""How the ref check placed an element before it read the flat tree: its DOM path (a -1 for each shadow root
crossed) and its `textContent`; for an element in a shadow root neither is what the snapshot it was read from
holds, so every such ref looked moved."""


def light_dom_check() -> str:
    """`refs.CHECK_SOURCE` with its flat-tree place and text replaced by `LIGHT_DOM_PLACE`."""
    source = refs.CHECK_SOURCE
    start, end = source.index("  // Its place in the flat tree"), source.index("  const attr = n =>")
    return source[:start] + LIGHT_DOM_PLACE.replace("SIGNATURE_TEXT", str(refs.SIGNATURE_TEXT)) + source[end:]


class LightDomRefContract(ToolContract):
    """Re-checks every ref with `light_dom_check`: an element inside a shadow root can never be placed."""

    async def recheck_ref(self, ref: str, identity: Identity, mode: Mode, arg: Any = None) -> dict[str, Any]:
        with mock.patch.object(refs, "CHECK_SOURCE", light_dom_check()):
            return await super().recheck_ref(ref, identity, mode, arg)


class LightDomRefBackend(OpenClaudeChromeBackend):
    """open_claude_chrome with `LightDomRefContract` for its contract."""

    async def start(self) -> None:
        await super().start()
        assert self.session is not None
        self.contract = LightDomRefContract(self.session)


class PlaceBlindRefContract(ToolContract):
    """Re-checks refs without comparing the element's place: a node moved elsewhere (another shadow host, another
    row) with its text unchanged still passes."""

    async def recheck_ref(self, ref: str, identity: Identity, mode: Mode, arg: Any = None) -> dict[str, Any]:
        compare = "if (JSON.stringify(path) !== JSON.stringify(expected[0]))"
        assert compare in refs.CHECK_SOURCE
        with mock.patch.object(refs, "CHECK_SOURCE", refs.CHECK_SOURCE.replace(compare, "if (false)")):
            return await super().recheck_ref(ref, identity, mode, arg)


class HitBlindRefContract(ToolContract):
    """Re-checks refs without asking what is at the element's centre: a click goes wherever the centre is, even
    onto another element drawn on top of it."""

    async def recheck_ref(self, ref: str, identity: Identity, mode: Mode, arg: Any = None) -> dict[str, Any]:
        hit_test = "if (!ours) return"
        assert hit_test in refs.CHECK_SOURCE
        with mock.patch.object(refs, "CHECK_SOURCE", refs.CHECK_SOURCE.replace(hit_test, "if (false) return")):
            return await super().recheck_ref(ref, identity, mode, arg)


class PlaywrightGatewayOnArgv(PlaywrightMCPBackend):
    """The gateway's URL, secret included, on the child's command line (`--cdp-endpoint`), as before issue 29."""

    def flags(self) -> list[str]:
        return ["--cdp-endpoint", self.config.cdp_endpoint, *super().flags()]


class DevToolsGatewayOnArgv(ChromeDevToolsMCPBackend):
    """The gateway's URL, secret included, on the child's command line (`--browserUrl`), as before issue 29."""

    def flags(self) -> list[str]:
        return ["--browserUrl", self.config.cdp_endpoint, *super().flags()]


class KeepsOldSessions(SessionManager):
    """Sessions as they were before issue 29: one outlives its turn and its Page's next session; only the cap of
    `max_sessions` closes one (the 10-turn count's control)."""

    def owner_ended(self, host: str, turn: str | None) -> None:
        return None

    async def replace_previous(self, page: Page, backend_name: str) -> None:
        return None


class OutlivesItsGrant(SessionManager):
    """Hears nothing when a turn or grant ends: a revoked grant's session keeps its child and gateway (the revoke
    control)."""

    def owner_ended(self, host: str, turn: str | None) -> None:
        return None


class SharedSessions(SessionManager):
    """Lets whoever holds a session's id use it, any turn, any host (the ownership control)."""

    def check_owner(self, owner: tuple[str, str], context: PageContext) -> None:
        return None


class ReplacesBusySessions(SessionManager):
    """Closes the Page's previous session when a new one opens even while a call runs on it (the busy control)."""

    async def replace_previous(self, page: Page, backend_name: str) -> None:
        for session in [s for s in self.live.values() if s.page is page and s.backend_name == backend_name]:
            self.invalidate(session, ReasonCode.stale_observation, "replaced")


@dataclass(frozen=True)
class Sabotage:
    """How one broken runtime is assembled: its service's parts, its gateway, and a change to its MCP server."""

    parts: Parts = field(default_factory=Parts)
    gateway_factory: type[ScopedGateway] = ScopedGateway
    server_change: Callable[[ComputerUseServer], None] | None = None
    backends: Mapping[str, BackendFactory] | None = None
    """Backends started in place of the installed ones of the same name."""


SABOTAGE: dict[str, Sabotage] = {
    "skip_capability": Sabotage(Parts(verifier=TrustingVerifier)),
    "screenshot_always": Sabotage(Parts(observe=ScreenshotAlways)),
    "no_policy": Sabotage(Parts(act=NoPolicy)),
    "policy_without_submit": Sabotage(Parts(act=PolicyWithoutSubmit)),
    "enter_without_focus_check": Sabotage(Parts(holds_focus=focus_always_held)),
    "submit_twice": Sabotage(Parts(act=SubmitTwice)),
    "judge_before_pointer": Sabotage(Parts(pointer=pointer_never_moves)),
    "hover_unanswered": Sabotage(Parts(hovered=hover_unanswered)),
    "answer_unawaited": Sabotage(Parts(pointer=answer_unawaited)),
    "bring_to_front": Sabotage(Parts(act=BringToFront)),
    "answer_dialogs": Sabotage(Parts(act=AnswerDialogs)),
    "switch_backend_on_failure": Sabotage(Parts(act=SwitchBackendOnFailure)),
    "light_dom_verify": Sabotage(Parts(verify=LightDomVerify)),
    "gateway_unscoped": Sabotage(gateway_factory=UnscopedGateway),
    "expose_upstream_tools": Sabotage(server_change=expose_upstream_tool),
    "light_dom_ref_check": Sabotage(backends={"open_claude_chrome": LightDomRefBackend}),
    "gateway_on_argv": Sabotage(
        backends={"playwright_mcp": PlaywrightGatewayOnArgv, "chrome_devtools_mcp": DevToolsGatewayOnArgv}
    ),
    "keep_old_sessions": Sabotage(Parts(sessions=KeepsOldSessions)),
    "sessions_outlive_grants": Sabotage(Parts(sessions=OutlivesItsGrant)),
    "shared_sessions": Sabotage(Parts(sessions=SharedSessions)),
    "replace_busy_sessions": Sabotage(Parts(sessions=ReplacesBusySessions)),
}
