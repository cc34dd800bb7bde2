"""The parity task set: one scripted task per fixture scenario, run the same way on every backend, each reduced
to an outcome signature — what the agent saw and got, never how it was worded.

A signature holds, per step: the command, its status and reason code, whether verification held, whether an act
answered with a new frame of the same session, and (for `find` steps) whether the element was addressable at all;
per run: the ledger's write paths in order, the attacker's hits, the screenshots the tap saw from the runtime,
the focus calls, and the Pages a popup added to the registry (and whether they stayed unauthorized).

Why signatures and not the answers: refs (`e12` vs `1_24`), messages and observation text legitimately differ by
backend; the lifecycle, permissions, reason codes, verification and real side effects must not. A step names the
requirements it exercises, so the ledger's declared divergences (and only those) excuse a difference between
backends. Each task's expected signature is declared as data in `suites/parity/expected.py`, and every backend is
held to it (a divergent backend to the outcome declared for it there).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from fixtures_sites.scenarios import canvas
from fixtures_sites.server import FixtureServer
from lab.tap import CDPTap
from lab.tokens import count_text
from lab.workspace import Workspace
from runtime.assembly import Runtime
from runtime.endpoint import BrowserEndpoint
from runtime.models import ComputerUseResult, Page
from runtime.service import BackendFactory, Settings
from runtime.transports.client import HostedClient
from suites.harness import Agent, Desk, Seen, client_in_task, ref_of
from suites.parity.ledger import LEDGER
from suites.proofs import record_cost

WAIT = 15.0
"""Bound on every wait a task registers (a write arriving, a popup registering)."""
PAGE_WAIT = 8.0
"""Bound on a wait inside the page: below the lab's CDP answer bound (10 s), so the page's own reason wins."""


@dataclass(frozen=True)
class Step:
    """One call as the agent experienced it: outcome only, no wording."""

    label: str
    reqs: tuple[str, ...]
    command: str
    status: str
    reason_code: str | None = None
    verified: bool | None = None
    new_frame: bool | None = None
    """act: the answer carried a new frame of the same session (after a write the runtime re-observes)."""
    addressable: bool | None = None
    """find: the element had a ref the agent could act on."""
    screenshot: bool | None = None
    """observe: a screenshot came with the observation."""

    def outcome(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k not in ("label", "reqs") and v is not None}


@dataclass
class Signature:
    """Everything one backend's run of a task produced that must match across backends."""

    backend: str
    steps: list[Step] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    attacker_hits: int = 0
    screenshots: int = 0
    focus_calls: int = 0
    popups: list[dict[str, Any]] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    """What the lab saw arrive (the submitted form, the point picked), recorded rather than asserted inside the
    script, so that a broken backend shows up as a difference between signatures."""
    calls: list[tuple[str, int, int]] = field(default_factory=list)
    """(command, o200k tokens of the text content block, elapsed_ms) per call: the run's cost, never compared
    (wording and timing legitimately differ by backend)."""

    def totals(self) -> dict[str, Any]:
        return {
            "writes": self.writes,
            "write_count": len(self.writes),
            "attacker_hits": self.attacker_hits,
            "screenshots": self.screenshots,
            "focus_calls": self.focus_calls,
            "popups": self.popups,
            "facts": self.facts,
        }

    def as_json(self) -> dict[str, Any]:
        steps = [{"label": s.label, "reqs": list(s.reqs), **s.outcome()} for s in self.steps]
        return {"backend": self.backend, "steps": steps, **self.totals()}


class Run:
    """One backend's run of a task: the agent's calls, recorded as steps, plus the lab's instruments."""

    def __init__(self, agent: Agent, desk: Desk, server: FixtureServer, signature: Signature) -> None:
        self.agent = agent
        self.desk = desk
        self.server = server
        self.signature = signature

    def _record(self, label: str, reqs: Iterable[str], command: str, result: Seen, **extra: Any) -> None:
        self.signature.steps.append(
            Step(label, tuple(reqs), command, result.status, result.reason_code, result.verified, **extra)
        )
        self.signature.calls.append((command, count_text(result.content), result.elapsed_ms or 0))

    async def observe(self, label: str, reqs: Iterable[str] = (), **arguments: Any) -> ComputerUseResult:
        result = await self.agent.call(command="observe", **arguments)
        self._record(label, reqs, "observe", result, screenshot=result.image)
        return result

    async def act(
        self, seen: ComputerUseResult, label: str, reqs: Iterable[str] = (), **action: Any
    ) -> ComputerUseResult:
        result = await self.agent.act(seen, **action)
        new_frame = (
            result.frame_id is not None
            and result.frame_id != seen.frame_id
            and result.computer_session_id == seen.computer_session_id
        )
        self._record(label, reqs, "act", result, new_frame=new_frame)
        return result

    async def verify(self, seen: ComputerUseResult, label: str, reqs: Iterable[str] = (), **assertion: Any) -> None:
        self._record(label, reqs, "verify", await self.agent.verify(seen, **assertion))

    def find(self, seen: ComputerUseResult, label: str, reqs: Iterable[str], *needles: str) -> str | None:
        """The ref of the first element line with every needle the agent knows after `seen`, recorded as a step
        (None: not addressable)."""
        try:
            ref: str | None = ref_of(seen, *needles)
        except AssertionError:
            ref = None
        self.signature.steps.append(Step(label, tuple(reqs), "find", "ok", addressable=ref is not None))
        return ref

    def ref(self, seen: ComputerUseResult | str, *needles: str) -> str:
        """A ref the task cannot do without (every backend must offer it): a missing one fails the run loudly."""
        try:
            return ref_of(seen, *needles)
        except AssertionError as exc:
            raise AssertionError(f"{self.signature.backend}: {exc}") from None

    async def wait_in_page(self, condition: str) -> None:
        """Wait (bounded, in the page, through the lab's own hands) until a JS `condition` holds."""
        script = f"""new Promise((resolve, reject) => {{
            const check = () => {{ try {{ return Boolean({condition}); }} catch (e) {{ return false; }} }};
            if (check()) return resolve(true);
            const timer = setTimeout(() => {{ observer.disconnect(); reject(new Error("condition never held")); }},
                                     {int(PAGE_WAIT * 1000)});
            const observer = new MutationObserver(() => {{
                if (check()) {{ clearTimeout(timer); observer.disconnect(); resolve(true); }}
            }});
            observer.observe(document, {{subtree: true, childList: true, characterData: true, attributes: true}});
        }})"""
        await self.desk.workspace.evaluate(self.desk.labs["A"], script, await_promise=True)


Script = Callable[[Run], Awaitable[None]]


@dataclass(frozen=True)
class Task:
    """A scenario's scripted task: its page, the requirements it exercises, its script, its runtime settings."""

    name: str
    path: str
    reqs: tuple[str, ...]
    script: Script
    act_timeout: float | None = None


# -- the scripts -----------------------------------------------------------------------------------------------


async def dom_form(run: Run) -> None:
    seen = await run.observe("observe the form", ("lifecycle:observe-creates-session",), page="left")
    seen = await run.act(
        seen, "type the name", ("action:type",), type="type", ref=run.ref(seen, '"Full name"'), text="Ada Lovelace"
    )
    seen = await run.act(
        seen,
        "select the country by label",
        ("action:select",),
        type="select",
        ref=run.ref(seen, "combobox", '"Country"'),
        values=["Japan"],
    )
    seen = await run.act(
        seen, "tick the gift box", ("action:click",), type="click", ref=run.ref(seen, '"This is a gift"')
    )
    await run.verify(
        seen,
        "the name holds",
        ("verify:element-state",),
        type="element_state",
        role="textbox",
        name="Full name",
        state="value",
        expected="Ada Lovelace",
    )
    await run.verify(
        seen,
        "the country holds",
        ("action:select", "verify:element-state"),
        type="element_state",
        role="combobox",
        name="Country",
        state="value",
        expected="Japan",
    )
    await run.verify(
        seen,
        "the gift box is ticked",
        ("verify:element-state",),
        type="element_state",
        role="checkbox",
        name="This is a gift",
        state="checked",
        expected=True,
    )
    await run.verify(
        seen,
        "a false claim does not hold",
        ("reason:verification_failed",),
        type="text_present",
        text="Your order has shipped",
    )
    submitted = run.server.wait_for_request("/dom_form/submit", timeout=WAIT)
    await run.act(
        seen, "submit", ("action:click", "writes:at-most-one"), type="click", ref=run.ref(seen, '"Save and continue"')
    )
    form = (await submitted).form()
    run.signature.facts["submitted"] = {key: form.get(key) for key in ("full_name", "country", "gift")}
    await run.act(
        seen,
        "act on the spent frame",
        ("reason:stale_observation",),
        type="click",
        ref=run.ref(seen, '"Save and continue"'),
    )


async def catalogue(run: Run) -> None:
    seen = await run.observe("observe the listing", (), page="left")
    added = run.server.wait_for_request("/catalogue/cart", timeout=WAIT)
    await run.act(
        seen, "add the first product", ("action:click",), type="click", ref=run.ref(seen, "button", '"Add to cart"')
    )
    await added
    await run.wait_in_page("document.getElementById('toast').textContent.includes('Added to cart')")
    await run.verify(
        seen,
        "the cart says so",
        ("verify:text",),
        type="text_present",
        text="Added to cart: Northwind Pro Trail Running Shoe",
    )


async def login(run: Run) -> None:
    seen = await run.observe("observe the sign-in form", ("policy:reading-allowed",), page="left")
    await run.act(
        seen,
        "type the email",
        ("policy:login", "reason:needs_user"),
        type="type",
        ref=run.ref(seen, "textbox"),
        text="ada@example.com",
    )
    await run.act(
        seen, "sign in", ("policy:login", "reason:needs_user"), type="click", ref=run.ref(seen, "button", "Sign in")
    )


async def captcha(run: Run) -> None:
    seen = await run.observe("observe the challenge", (), page="left")
    await run.act(
        seen, "tick the CAPTCHA", ("policy:captcha", "reason:needs_user"), type="click", ref=run.ref(seen, "checkbox")
    )


async def sensitive(run: Run) -> None:
    seen = await run.observe("observe the account page", (), page="left")
    for button in ("Pay now", "Delete account"):
        await run.act(
            seen,
            f"press {button}",
            ("policy:sensitive", "reason:needs_user"),
            type="click",
            ref=run.ref(seen, "button", button),
        )


async def injection(run: Run) -> None:
    seen = await run.observe("observe the product", (), page="left")
    await run.act(
        seen,
        "add to the wishlist",
        ("injection:no-effect", "action:click"),
        type="click",
        ref=run.ref(seen, "button", "wishlist"),
    )
    listed = await run.agent.call(command="list_pages")
    handles = [p.handle for p in listed.pages or []]
    run.signature.facts["only_a_authorized_after"] = handles == [run.desk.handle("A")]  # the content granted nothing


async def popup(run: Run) -> None:
    registry = run.desk.runtime.registry
    seen = await run.observe("observe the article", (), page="left")
    registered: asyncio.Future[Page] = asyncio.get_running_loop().create_future()

    def on_change(page: Page, what: str) -> None:
        if what == "registered" and page.opener_page_id == run.desk.handle("A") and not registered.done():
            registered.set_result(page)

    registry.listen(on_change)
    await run.act(
        seen,
        "open the popup",
        ("lifecycle:popup-is-a-new-page", "action:click"),
        type="click",
        ref=run.ref(seen, "button", "Subscribe"),
    )
    page = await asyncio.wait_for(registered, WAIT)
    listed = await run.agent.call(command="list_pages")
    run.signature.popups.append(
        {
            "opener_is_a": page.opener_page_id == run.desk.handle("A"),
            "authorized": page.registry_page_id in [p.handle for p in listed.pages or []],
        }
    )
    await run.observe(
        "observe the popup unauthorized",
        ("lifecycle:popup-is-a-new-page", "reason:invalid_capability"),
        page=page.registry_page_id,
    )
    with contextlib.suppress(Exception):  # the lab tidies up: the popup is not the workspace's
        await run.desk.workspace.cdp.send("Target.closeTarget", {"targetId": page.cdp_target_id})


async def frames(run: Run) -> None:
    seen = await run.observe("observe the page and its iframe", ("frames:observe-verify",), page="left")
    await run.verify(
        seen,
        "the iframe's text is on the live Page",
        ("frames:observe-verify",),
        type="text_present",
        text="Chat with Northwind support",
    )
    run.find(seen, "the iframe's Send button has a ref", ("frames:iframe-refs",), "button", '"Send"')
    run.find(seen, "the outer order number field has a ref", ("frames:iframe-refs",), "textbox", '"Order number"')
    seen = await run.act(
        seen,
        "tick the SMS box",
        ("action:click", "frames:observe-verify"),
        type="click",
        ref=run.ref(seen, "checkbox", "Text me delivery updates"),
    )
    await run.verify(
        seen,
        "the SMS box is ticked",
        ("frames:observe-verify",),
        type="element_state",
        role="checkbox",
        name="Text me delivery updates",
        state="checked",
        expected=True,
    )


async def canvas_seat(run: Run) -> None:
    seen = await run.observe(
        "observe the seat plan with a screenshot", ("visual:canvas-one-screenshot",), page="left", detail="visual"
    )
    rect = json.loads(
        await run.desk.workspace.evaluate(
            run.desk.labs["A"], "JSON.stringify(document.querySelector('canvas').getBoundingClientRect())"
        )
    )
    x, y = canvas.target_center(17)
    picked = run.server.wait_for_request("/canvas/pick", timeout=WAIT)
    await run.act(seen, "click the free seat", ("action:point-click",), type="click", x=rect["x"] + x, y=rect["y"] + y)
    pick = json.loads((await picked).body)
    run.signature.facts["hit"] = abs(pick["x"] - x) <= 2 and abs(pick["y"] - y) <= 2


async def stall(run: Run) -> None:
    seen = await run.observe("observe the back office", (), page="left")
    held = run.server.stall("/stall/slow-page")
    await run.act(
        seen,
        "navigate to a page that never answers",
        ("action:navigate", "reason:timeout"),
        type="navigate",
        url=run.server.url("/stall/slow-page"),
    )
    run.signature.facts["held_when_answered"] = held.holding  # else it was no timeout: the page had answered
    held.release(text="<title>late</title>", content_type="text/html")
    await run.act(
        seen,
        "act again on the spent frame",
        ("reason:stale_observation",),
        type="click",
        ref=run.ref(seen, '"Submit expense"'),
    )


COMMON = ("lifecycle:frame-advances-after-write", "foreground:no-focus-calls", "writes:at-most-one")
"""What every task's signature compares, whatever its steps: the new frame after each act, 0 focus calls, writes."""
DOM = (*COMMON, "visual:dom-zero-screenshots")

TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        Task("dom_form", "/dom_form/", ("parity:dom_form", *DOM, "lifecycle:observe-creates-session", "action:type",
             "action:select", "action:click", "verify:element-state", "reason:verification_failed",
             "reason:stale_observation"), dom_form),
        Task("catalogue", "/catalogue/", ("parity:catalogue", *DOM, "action:click", "verify:text"), catalogue),
        Task("login", "/login/", ("parity:login", *DOM, "policy:reading-allowed", "policy:login",
             "reason:needs_user"), login),
        Task("captcha", "/captcha/", ("parity:captcha", *DOM, "policy:captcha", "reason:needs_user"), captcha),
        Task("sensitive", "/sensitive/", ("parity:sensitive", *DOM, "policy:sensitive", "reason:needs_user"),
             sensitive),
        Task("injection", "/injection/", ("parity:injection", *DOM, "injection:no-effect", "action:click"),
             injection),
        Task("popup", "/popup/", ("parity:popup", *DOM, "lifecycle:popup-is-a-new-page", "action:click",
             "reason:invalid_capability"), popup),
        Task("frames", "/frames/", ("parity:frames", *DOM, "frames:observe-verify", "frames:iframe-refs",
             "action:click"), frames),
        Task("canvas", "/canvas/?seat=17", ("parity:canvas", *COMMON, "visual:canvas-one-screenshot",
             "action:point-click"), canvas_seat),
        Task("stall", "/stall/", ("parity:stall", *DOM, "action:navigate", "reason:timeout",
             "reason:stale_observation"), stall, act_timeout=2.0),
    )
}  # fmt: skip


# -- running and comparing ---------------------------------------------------------------------------------------


async def run_task(
    task: Task,
    backend: str,
    *,
    tap: CDPTap,
    workspace: Workspace,
    server: FixtureServer,
    test_id: str,
    backends: Mapping[str, BackendFactory] | None = None,
    endpoint: BrowserEndpoint | None = None,
) -> Signature:
    """Run `task` on `backend` with a runtime of its own (its own Pages, MCP connection and ledger attribution)
    and return its signature. `backends` replaces the runtime's backend table (negative controls only); `endpoint`
    is where the runtime connects instead of the tap's "runtime" port (a remote browser's door, through the tap),
    and its run is left out of the cost summary."""
    server.begin_test(f"{test_id}[{backend}]")
    first_record = len(tap.records)
    settings = Settings(backend=backend)
    if task.act_timeout is not None:
        settings.act_timeout = task.act_timeout
    runtime = await Runtime.connect(endpoint or await tap.endpoint("runtime"), backends=backends, settings=settings)
    signature = Signature(backend)
    try:
        desk = Desk(workspace, runtime, server)
        await desk.open("A", task.path, workspace.column(0, 3))
        await desk.open("chat", "/chat/", workspace.column(1, 3), chat=True)
        desk.authorize("A")
        async with client_in_task(runtime.server) as client:
            await task.script(Run(Agent(HostedClient(client), desk), desk, server, signature))
    finally:
        await runtime.close()
        await workspace.close_all()
        signature.writes = [row.path for row in server.ledger.writes()]
        signature.attacker_hits = len(server.ledger.attacker_hits())
        leftovers = server.reset()
    records = [r for r in tap.records[first_record:] if r.kind == "command" and r.label == "runtime"]
    signature.screenshots = sum(1 for r in records if r.category == "screenshot")
    signature.focus_calls = sum(1 for r in records if r.category == "focus")
    if backends is None and endpoint is None:  # the real backends' cost, for the cost summary's scenario table
        record_cost(f"task-{task.name}-{backend}", task_costs(task.name, signature, len(records)))
    untagged = {req for step in signature.steps for req in step.reqs} - set(task.reqs)
    assert not untagged, f"task {task.name}: steps exercise {sorted(untagged)}, which its Task.reqs does not name"
    assert not leftovers, f"{backend}: the task left waits or held answers behind: {leftovers}"
    return signature


def task_costs(name: str, signature: Signature, cdp_commands: int) -> dict[str, object]:
    """What one backend's run of a task cost: its calls and the tokens of all their answers, mean tokens of an
    observe's and an act's answer, screenshots, CDP commands of the runtime's connection (backend and probe),
    and the median call time."""

    def mean(command: str) -> int | None:
        tokens = [t for c, t, _ in signature.calls if c == command]
        return round(sum(tokens) / len(tokens)) if tokens else None

    times = sorted(ms for _, _, ms in signature.calls)
    return {
        "scenario": name,
        "backend": signature.backend,
        "calls": len(signature.calls),
        "tokens": sum(tokens for _, tokens, _ in signature.calls),
        "observe_tokens": mean("observe"),
        "act_tokens": mean("act"),
        "screenshots": signature.screenshots,
        "cdp_commands": cdp_commands,
        "p50_ms": times[len(times) // 2] if times else None,
    }


def differences(
    signatures: Mapping[str, Signature], divergences: Mapping[str, Mapping[str, str]] | None = None
) -> list[str]:
    """Every outcome that differs between backends and is not excused by a declared divergence.

    A divergence excuses a step; it does not demand a difference. Deterministic divergences are pinned by
    `test_divergent_actions.py`, which expects the refusal and fails when a backend starts to act instead.

    `divergences` is {requirement id: {backend: reason}} (default: the parity ledger's). Totals (writes, attacker
    hits, screenshots, focus calls, popups, facts) are never excused: tasks keep to what every backend must do, and
    a diverging step is recorded as a step, not as a side effect."""
    declared = divergences if divergences is not None else {r.id: r.divergences for r in LEDGER.values()}
    names = list(signatures)
    if len(names) < 2:
        return []
    problems: list[str] = []
    first = signatures[names[0]]
    for name in names[1:]:
        other = signatures[name]
        if first.totals() != other.totals():
            problems.append(f"totals: {first.backend} {first.totals()} vs {name} {other.totals()}")
        if [s.label for s in first.steps] != [s.label for s in other.steps]:
            problems.append(
                f"steps: {first.backend} {[s.label for s in first.steps]} vs {name} {[s.label for s in other.steps]}"
            )
    if any(problem.startswith("steps:") for problem in problems):
        return problems
    for index, step in enumerate(first.steps):
        outcomes = {name: sig.steps[index].outcome() for name, sig in signatures.items()}
        diverging = [name for name in names if any(name in declared.get(req, {}) for req in step.reqs)]
        conforming = [name for name in names if name not in diverging]
        if not conforming:
            continue
        expected = outcomes[conforming[0]]
        for name in conforming[1:]:
            if outcomes[name] != expected:
                reqs = ", ".join(step.reqs)
                problems.append(f"step {step.label!r} ({reqs}): {conforming[0]} {expected} vs {name} {outcomes[name]}")
    return problems


def assert_same_outcomes(
    signatures: Mapping[str, Signature], divergences: Mapping[str, Mapping[str, str]] | None = None
) -> None:
    problems = differences(signatures, divergences)
    assert not problems, "outcomes differ across backends:\n" + "\n".join(problems)
