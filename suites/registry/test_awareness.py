"""Page awareness, exercised on real windows: what the host does to a pane (swap, focus, move, hide, transfer,
target replacement) and what the next provider request and the next act on an existing session see.

Each check is one function used by its proof and by its negative control, so the code that passes on the real
runtime is shown to fail on a broken one built here (a patched registry, preview reader or session manager).
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

import pytest

from fixtures_sites.server import FixtureServer
from lab.tap import CDPTap
from lab.workspace import LabPage, Workspace
from runtime.computer_session import ComputerSession
from runtime.models import ComputerUseResult, Page
from runtime.reasons import ReasonCode
from suites.harness import Agent, Desk, ref_of

# -- shared set-ups and window-shell moves the lab's Workspace does not have --------------------------------------


async def a_chat_b(desk: Desk, path_a: str, path_b: str, *authorized: str) -> Desk:
    """A left of the chat, B right of it; `authorized` (default both) are the turn's Pages."""
    await desk.open("A", path_a, desk.workspace.column(0, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
    await desk.open("B", path_b, desk.workspace.column(2, 3))
    desk.authorize(*(authorized or ("A", "B")))
    return desk


async def focus(workspace: Workspace, page: LabPage) -> None:
    """Give `page`'s window the focus, as a user clicking into it would (the shell's own connection), and check
    through the page's own document that it got it (headless windows open unfocused)."""
    has_focus = "document.hasFocus()"
    assert await workspace.evaluate(page, has_focus) is False, f"{page.name} had the focus already"
    assert await workspace.focus(page) is True, f"{page.name} did not get the focus"


async def stamp(workspace: Workspace, page: LabPage) -> str:
    """Put a fresh, unique line at the very top of the Page's text; returns it (the preview must start with it)."""
    text = f"stamp-{page.name}-{secrets.token_hex(6)}"
    await workspace.evaluate(
        page, f"document.body.prepend(Object.assign(document.createElement('p'), {{textContent: {text!r}}}))"
    )
    return text


SIDE_EFFECTS = frozenset({"input", "write", "focus"})


@dataclass
class Mark:
    """A point in the tap's record: what the runtime sent to a target after it."""

    tap: CDPTap
    at: int

    @classmethod
    def now(cls, tap: CDPTap) -> Mark:
        return cls(tap, len(tap.records))

    def commands_on(self, target: str, categories: frozenset[str] | None = None) -> list[str]:
        return [
            r.method
            for r in self.tap.records[self.at :]
            if r.kind == "command" and r.target == target and (categories is None or r.category in categories)
        ]

    def targets(self) -> set[str]:
        return {r.target for r in self.tap.records[self.at :] if r.kind == "command" and r.label == "runtime"}


async def submit_on(agent: Agent, seen: ComputerUseResult, name: str) -> ComputerUseResult:
    """Type a name and press "Save and continue" on the session and frame chain of `seen`: one real write."""
    typed = await agent.act(seen, type="type", ref=ref_of(seen, '"Full name"'), text=name)
    assert typed.status == "ok", typed
    assert typed.computer_session_id == seen.computer_session_id
    done = await agent.act(typed, type="click", ref=ref_of(typed, '"Save and continue"'))
    assert done.status == "ok", done
    return done


# -- 1. swap: the next provider request's relation and preview -----------------------------------------------------


async def check_swap(desk: Desk, agent: Agent) -> None:
    """After a real swap, `list_pages` of the next provider request has both relations flipped and each preview
    showing that Page's own, current content; the relation word then resolves to the Page that is there now."""
    a, b = desk.handle("A"), desk.handle("B")
    before = await agent.call(command="list_pages")
    assert {p.handle: p.relation for p in before.pages or []} == {a: "left", b: "right"}
    stamps = {a: await stamp(desk.workspace, desk.labs["A"]), b: await stamp(desk.workspace, desk.labs["B"])}
    old_a, old_b = await desk.workspace.bounds(desk.labs["A"]), await desk.workspace.bounds(desk.labs["B"])
    assert await desk.workspace.swap(desk.labs["A"], desk.labs["B"]) == (old_b, old_a)  # the windows really moved

    request = await desk.request()
    listed = await agent.call(request, command="list_pages")
    pages = {p.handle: p for p in listed.pages or []}
    relations = {h: p.relation for h, p in pages.items()}
    assert relations == {a: "right", b: "left"}, f"relations after the swap: {relations}"
    assert {h: p.relation for h, p in request.context.pages.items()} == {a: "right", b: "left"}
    for handle, other in ((a, b), (b, a)):
        preview = pages[handle].preview
        assert preview.startswith(stamps[handle]), f"{handle}'s preview lacks its own stamp: {preview!r}"
        assert stamps[other] not in pages[handle].preview
    assert "Shipping details" in pages[a].preview
    assert "Shipping details" not in pages[b].preview
    seen = await agent.observe(page="left")
    assert seen.page is not None
    assert seen.page.handle == b, seen.page


@pytest.mark.req("awareness:swap-left-right")
async def test_after_a_swap_the_next_request_lists_both_pages_with_flipped_relations_and_their_own_previews(
    desk: Desk, agent: Agent
) -> None:
    await a_chat_b(desk, "/dom_form/", "/catalogue/")
    await check_swap(desk, agent)


def geometry_frozen_at_registration(desk: Desk, monkeypatch: pytest.MonkeyPatch) -> None:
    """A registry that reads title and URL on refresh but keeps each window's geometry from registration."""
    registry = desk.runtime.registry
    real = registry.refresh

    async def refresh(handles: list[str]) -> None:
        kept = {p.registry_page_id: p.geometry for p in registry.pages()}
        await real(handles)
        for page in registry.pages():
            page.geometry = kept[page.registry_page_id]

    monkeypatch.setattr(registry, "refresh", refresh)


def preview_cached_per_page(desk: Desk, monkeypatch: pytest.MonkeyPatch) -> None:
    """A host that reads each Page's preview once and serves it from then on."""
    host = desk.runtime.host
    real, cache = host.read_preview, {}

    async def read(page: Page) -> str:
        if page.registry_page_id not in cache:
            cache[page.registry_page_id] = await real(page)
        return cache[page.registry_page_id]

    monkeypatch.setattr(host, "read_preview", read)


def preview_cached_per_pane(desk: Desk, monkeypatch: pytest.MonkeyPatch) -> None:
    """A host that keeps the preview of a pane position ("left", "right"), not of the Page in it."""
    host, registry = desk.runtime.host, desk.runtime.registry
    real, cache = host.read_preview, {}

    async def read(page: Page) -> str:
        slot = registry.info(page).relation
        if slot not in cache:
            cache[slot] = await real(page)
        return cache[slot]

    monkeypatch.setattr(host, "read_preview", read)


@pytest.mark.negative_control
@pytest.mark.req("awareness:swap-left-right")
@pytest.mark.parametrize(
    ("broken", "caught_by"),
    [
        (geometry_frozen_at_registration, "relations after the swap"),
        (preview_cached_per_page, "lacks its own stamp"),
        (preview_cached_per_pane, "lacks its own stamp"),
    ],
    ids=["geometry-frozen", "preview-cached-per-page", "preview-cached-per-pane"],
)
async def test_the_swap_check_catches_stale_geometry_and_cached_previews(
    desk: Desk,
    agent: Agent,
    monkeypatch: pytest.MonkeyPatch,
    broken: Callable[[Desk, pytest.MonkeyPatch], None],
    caught_by: str,
) -> None:
    await a_chat_b(desk, "/dom_form/", "/catalogue/")
    broken(desk, monkeypatch)
    with pytest.raises(AssertionError, match=caught_by):
        await check_swap(desk, agent)


# -- 2. focus and pane moves keep the binding -------------------------------------------------------------------


async def focus_b(desk: Desk) -> None:
    await focus(desk.workspace, desk.labs["B"])


async def move_a(desk: Desk) -> None:
    """Move and resize A's window inside its workspace (still left of the chat): a pane move, same group."""
    lab_a = desk.labs["A"]
    before = await desk.workspace.bounds(lab_a)
    wanted = replace(before, left=before.left + 40, top=before.top + 30, width=before.width - 120, height=600)
    assert await desk.workspace.place(lab_a, wanted) == wanted != before


async def check_binding_kept(
    desk: Desk, agent: Agent, tap: CDPTap, server: FixtureServer, change: Callable[[Desk], Awaitable[None]]
) -> None:
    """After `change`, the next act on A's session and frame chain is not stale, and lands on A only: the ledger's
    one write came from A, and the runtime sent no command to any other Page."""
    seen = await agent.observe(page="left")
    revision = desk.runtime.registry.get(desk.handle("A")).revision
    await change(desk)
    mark = Mark.now(tap)
    done = await submit_on(agent, seen, "Mary Jackson")
    assert done.computer_session_id == seen.computer_session_id
    assert desk.runtime.registry.get(desk.handle("A")).revision == revision
    writes = server.ledger.writes()
    assert [(w.path, w.referer.rsplit("?", 1)[-1]) for w in writes] == [("/dom_form/submit", "page=A")], writes
    assert mark.commands_on(desk.target("A")), "the act sent nothing to A"
    assert mark.targets() <= {desk.target("A"), "browser"}, mark.targets()
    assert not mark.commands_on(desk.target("B"))
    assert not mark.commands_on(desk.target("chat"))


@pytest.mark.req("awareness:focus-keeps-binding", "writes:at-most-one")
async def test_focusing_another_page_keeps_the_binding_and_the_next_act_lands_on_the_same_page(
    desk: Desk, agent: Agent, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    await a_chat_b(desk, "/dom_form/?page=A", "/dom_form/?page=B", "A")
    await check_binding_kept(desk, agent, tap, fixture_server, focus_b)


@pytest.mark.req("awareness:pane-move-keeps-binding", "writes:at-most-one")
async def test_moving_and_resizing_the_pane_keeps_the_binding_and_the_next_act_lands_on_the_same_page(
    desk: Desk, agent: Agent, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    await a_chat_b(desk, "/dom_form/?page=A", "/dom_form/?page=B", "A")
    await check_binding_kept(desk, agent, tap, fixture_server, move_a)


def revises_on_every_refresh(desk: Desk, monkeypatch: pytest.MonkeyPatch) -> None:
    """A registry that bumps a Page's revision whenever it reads the desk (cannot tell focus from hide)."""
    registry = desk.runtime.registry
    real = registry.refresh

    async def refresh(handles: list[str]) -> None:
        await real(handles)
        for handle in handles:
            registry._revise(registry.get(handle), "revised")

    monkeypatch.setattr(registry, "refresh", refresh)


def revises_on_geometry_change(desk: Desk, monkeypatch: pytest.MonkeyPatch) -> None:
    """A registry that treats a pane move like a move to another group: new geometry, new revision."""
    registry = desk.runtime.registry
    real = registry.refresh

    async def refresh(handles: list[str]) -> None:
        kept = {h: registry.get(h).geometry for h in handles}
        await real(handles)
        for handle in handles:
            if registry.get(handle).geometry != kept[handle]:
                registry._revise(registry.get(handle), "revised")

    monkeypatch.setattr(registry, "refresh", refresh)


@pytest.mark.negative_control
@pytest.mark.req("awareness:focus-keeps-binding", "awareness:pane-move-keeps-binding")
@pytest.mark.parametrize(
    ("change", "broken"),
    [(focus_b, revises_on_every_refresh), (move_a, revises_on_geometry_change)],
    ids=["focus", "pane-move"],
)
async def test_the_keeps_binding_check_catches_a_registry_that_invalidates_on_focus_or_pane_moves(
    desk: Desk,
    agent: Agent,
    tap: CDPTap,
    fixture_server: FixtureServer,
    monkeypatch: pytest.MonkeyPatch,
    change: Callable[[Desk], Awaitable[None]],
    broken: Callable[[Desk, pytest.MonkeyPatch], None],
) -> None:
    await a_chat_b(desk, "/dom_form/?page=A", "/dom_form/?page=B", "A")
    broken(desk, monkeypatch)
    with pytest.raises(AssertionError, match="page_context_stale"):
        await check_binding_kept(desk, agent, tap, fixture_server, change)


# -- 3. hide and transfer invalidate; 4. target replacement is target_lost ---------------------------------------


async def hide_a(desk: Desk) -> None:
    """The host hides A's pane: the window is minimized for real, then the host tells the registry."""
    lab_a = desk.labs["A"]
    assert (await desk.workspace.minimize(lab_a)).state == "minimized"
    assert await desk.workspace.evaluate(lab_a, "document.visibilityState") == "hidden"
    desk.runtime.registry.hide(desk.handle("A"))


def transfer_a_to(second: Workspace) -> Callable[[Desk], Awaitable[None]]:
    async def transfer_a(desk: Desk) -> None:
        """The host moves A's window into another workspace window (another group), then tells the registry."""
        area = second.column(0, 1)
        assert await desk.workspace.place(desk.labs["A"], area) == area
        desk.runtime.registry.transfer(desk.handle("A"), second.name)

    return transfer_a


async def replace_a(desk: Desk) -> None:
    """The host recreates the target behind A's tab (same logical tab and place, new target)."""
    old = desk.target("A")
    lab_a = await desk.workspace.replace_target(desk.labs["A"])
    assert lab_a.target_id != old
    desk.runtime.registry.replace_target(desk.handle("A"), lab_a.target_id, lab_a.window_id)


async def check_refused_after(
    desk: Desk,
    agent: Agent,
    tap: CDPTap,
    server: FixtureServer,
    change: Callable[[Desk], Awaitable[None]],
    expected: ReasonCode,
) -> tuple[ComputerUseResult, ComputerUseResult]:
    """After `change`, the next act on A's session (with a token of a fresh provider request) is refused with
    exactly `expected`, writes nothing and sends no command to A's target, old or new. From the change on, what
    else reaches A (the host's preview read, the ended session's teardown) is never input, focus or a state change.
    """
    seen = await agent.observe(page="left")
    old_target = desk.target("A")
    changed = Mark.now(tap)
    await change(desk)
    await desk.runtime.service.sessions.settle()  # closing the ended session is not part of the act
    request = await desk.request()
    mark = Mark.now(tap)
    refused = await agent.call(
        request,
        command="act",
        computer_session_id=seen.computer_session_id,
        frame_id=seen.frame_id,
        action={"type": "click", "ref": ref_of(seen, '"Save and continue"')},
    )
    assert refused.status == "failed", f"the act was not refused: {refused}"
    assert refused.reason_code == expected.value, f"expected exactly {expected.value}: {refused}"
    assert server.ledger.writes() == []
    assert mark.commands_on(old_target) == []
    assert mark.commands_on(desk.target("A")) == []
    for target in {old_target, desk.target("A")}:
        assert changed.commands_on(target, SIDE_EFFECTS) == [], changed.commands_on(target)
    return seen, refused


@pytest.mark.req("awareness:hide-invalidates", "reason:page_context_stale")
async def test_hiding_the_pane_makes_the_next_act_page_context_stale_with_no_write(
    desk: Desk, agent: Agent, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    await a_chat_b(desk, "/dom_form/?page=A", "/catalogue/")
    await fill_name(desk)
    await check_refused_after(desk, agent, tap, fixture_server, hide_a, ReasonCode.page_context_stale)


@pytest.mark.req("awareness:transfer-invalidates", "reason:page_context_stale")
async def test_transferring_the_page_to_another_window_makes_the_next_act_page_context_stale_with_no_write(
    desk: Desk, agent: Agent, tap: CDPTap, fixture_server: FixtureServer, other_window: Workspace
) -> None:
    await a_chat_b(desk, "/dom_form/?page=A", "/catalogue/")
    await fill_name(desk)
    await check_refused_after(
        desk, agent, tap, fixture_server, transfer_a_to(other_window), ReasonCode.page_context_stale
    )
    listed = await agent.call(command="list_pages")
    assert {p.handle: p.relation for p in listed.pages or []}[desk.handle("A")] == "other_window"


@pytest.mark.req("lifecycle:target-replaced", "reason:target_lost")
async def test_replacing_the_target_behind_the_tab_makes_the_next_act_target_lost_and_only_that(
    desk: Desk, agent: Agent, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    await a_chat_b(desk, "/dom_form/?page=A", "/catalogue/")
    await fill_name(desk)
    seen, _ = await check_refused_after(desk, agent, tap, fixture_server, replace_a, ReasonCode.target_lost)
    fresh = await agent.observe(page="left")  # a new session binds the new target
    assert fresh.computer_session_id != seen.computer_session_id


async def fill_name(desk: Desk) -> None:
    """Fill the required name through the lab, so the one act under test ("Save and continue") would write."""
    await desk.workspace.evaluate(desk.labs["A"], "document.getElementById('full_name').value = 'Dorothy Vaughan'")


def binding_ignores_revisions(desk: Desk, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session manager whose binding check ignores revision bumps (hide, transfer), still checking target and
    access."""
    manager = desk.runtime.service.sessions
    real = manager.check_binding

    def check_binding(session: ComputerSession) -> None:
        session.revision = session.page.revision
        real(session)

    monkeypatch.setattr(manager, "check_binding", check_binding)


def replacement_reported_as_stale(desk: Desk, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session manager that ends a session whose target was replaced with `page_context_stale`."""
    manager = desk.runtime.service.sessions
    real = manager.invalidate

    def invalidate(session: ComputerSession, code: ReasonCode, message: str) -> None:
        real(session, ReasonCode.page_context_stale if code is ReasonCode.target_lost else code, message)

    monkeypatch.setattr(manager, "invalidate", invalidate)


@pytest.mark.negative_control
@pytest.mark.req("awareness:hide-invalidates", "awareness:transfer-invalidates")
@pytest.mark.parametrize("what", ["hide", "transfer"])
async def test_the_invalidation_check_catches_a_binding_check_that_ignores_hide_and_transfer(
    desk: Desk,
    agent: Agent,
    tap: CDPTap,
    fixture_server: FixtureServer,
    other_window: Workspace,
    monkeypatch: pytest.MonkeyPatch,
    what: str,
) -> None:
    await a_chat_b(desk, "/dom_form/?page=A", "/catalogue/")
    await fill_name(desk)
    binding_ignores_revisions(desk, monkeypatch)
    monkeypatch.setattr(desk.runtime.service.settings, "act_timeout", 5.0)  # a minimized window may never settle
    change = hide_a if what == "hide" else transfer_a_to(other_window)
    with pytest.raises(AssertionError, match=r"not refused|expected exactly page_context_stale"):
        await check_refused_after(desk, agent, tap, fixture_server, change, ReasonCode.page_context_stale)


@pytest.mark.negative_control
@pytest.mark.req("lifecycle:target-replaced")
async def test_the_replacement_check_catches_a_runtime_that_reports_a_replaced_target_as_stale(
    desk: Desk, agent: Agent, tap: CDPTap, fixture_server: FixtureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    await a_chat_b(desk, "/dom_form/?page=A", "/catalogue/")
    await fill_name(desk)
    replacement_reported_as_stale(desk, monkeypatch)
    with pytest.raises(AssertionError, match="expected exactly target_lost") as caught:
        await check_refused_after(desk, agent, tap, fixture_server, replace_a, ReasonCode.target_lost)
    # The wrong code is one the former membership check (target_lost or page_context_stale) accepted.
    assert "reason_code=<ReasonCode.page_context_stale" in str(caught.value)
