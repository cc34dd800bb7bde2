"""The parity task set: one task per fixture scenario, run the same way on every backend, each reduced to an
outcome signature — what the agent saw and got, never how it was worded.

The tasks are data (`suites/tasks/<scenario>.json`, `suites/tasks/taskfile.py`), the same files the installed app
runs from its console (`suites/installed/taskset.py`): `play` hands each step to the script provider, which
resolves its references against the results so far, sends its calls through the runtime, records the labelled
ones as steps and makes the lab's moves around them. `Run` and `Task` also carry the real-apps corpus's scripts
(`suites/realapps/tasks.py`), which are Python.

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
import functools
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from fixtures_sites.server import FixtureServer
from host.providers.base import AssistantTurn, Entry, ProviderError, ToolCall, ToolResult, ToolResults
from host.providers.script import ScriptProvider, ScriptStep, parse_steps
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
from suites.tasks.taskfile import CANVAS_RECT, SCENARIOS, Call, Find, Reply, TaskFile, seat_point

PARITY = "parity"

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

    def record(self, label: str | None, reqs: Iterable[str], arguments: Mapping[str, Any], result: Seen) -> None:
        """A call's cost, and (when it has a label) its step: an observe's screenshot, an act's new frame."""
        command = arguments["command"]
        extra: dict[str, Any] = {}
        if command == "observe":
            extra["screenshot"] = result.image
        elif command == "act":
            extra["new_frame"] = (
                result.frame_id is not None
                and result.frame_id != arguments.get("frame_id")
                and result.computer_session_id == arguments.get("computer_session_id")
            )
        if label is not None:
            self.signature.steps.append(
                Step(label, tuple(reqs), command, result.status, result.reason_code, result.verified, **extra)
            )
        self.signature.calls.append((command, count_text(result.content), result.elapsed_ms or 0))

    async def observe(self, label: str, reqs: Iterable[str] = (), **arguments: Any) -> ComputerUseResult:
        result = await self.agent.call(command="observe", **arguments)
        self.record(label, reqs, {"command": "observe", **arguments}, result)
        return result

    async def act(
        self, seen: ComputerUseResult, label: str, reqs: Iterable[str] = (), **action: Any
    ) -> ComputerUseResult:
        result = await self.agent.act(seen, **action)
        sent = {"command": "act", "computer_session_id": seen.computer_session_id, "frame_id": seen.frame_id}
        self.record(label, reqs, sent, result)
        return result

    async def verify(self, seen: ComputerUseResult, label: str, reqs: Iterable[str] = (), **assertion: Any) -> None:
        self.record(label, reqs, {"command": "verify"}, await self.agent.verify(seen, **assertion))

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


# -- the task set, played from its data ---------------------------------------------------------------------------


async def _unheard(text: str) -> None:
    """The script provider streams a reply's text; no one reads it here."""


class Moves:
    """The lab's moves around a task file's calls (`suites/tasks/taskfile.py`, `lab`), as the parity runner makes
    them, and the `$lab` values only the lab knows."""

    def __init__(self, task: TaskFile, run: Run) -> None:
        self.task = task
        self.run = run
        self.values: dict[str, Any] = {}
        self.popups: list[Page] = []

    async def fill(self, reply: Reply) -> dict[str, Any]:
        """The reply as the script provider reads it, with the `$lab` values it names (measured on first use)."""
        for name in reply.lab_names(PARITY) - set(self.values):
            if name.startswith("url:"):
                self.values[name] = self.run.server.url(name.removeprefix("url:"))
            elif name in ("seat.x", "seat.y") and self.task.seat is not None:
                rect = json.loads(await self.run.desk.workspace.evaluate(self.run.desk.labs["A"], CANVAS_RECT))
                self.values.update(seat_point(rect, self.task.seat))
            else:
                raise AssertionError(f"task {self.task.scenario}: no $lab value {name!r} before this step")
        return reply.script(PARITY, self.values)

    async def call(self, entry: Call, call: ToolCall) -> ToolResult:
        """One call over MCP, recorded (a step when it has a label), with the lab's moves around it."""
        run, lab = self.run, entry.lab
        waiter = run.server.wait_for_request(lab["request"], timeout=WAIT) if "request" in lab else None
        held = run.server.stall(lab["hold"]) if "hold" in lab else None
        opened = self._watch_popup() if lab.get("popup") else None
        result = await run.agent.call(**call.arguments)
        run.record(entry.label, entry.reqs, call.arguments, result)
        if held is not None:
            run.signature.facts["held_when_answered"] = held.holding  # else no timeout: the page had answered
            held.release(text="<title>late</title>", content_type="text/html")
        if waiter is not None:
            await waiter
        if "settle" in lab:
            await run.wait_in_page(lab["settle"])
        if opened is not None:
            await self._record_popup(await asyncio.wait_for(opened, WAIT))
        if "only_the_task_page" in lab:  # the content granted nothing
            run.signature.facts[lab["only_the_task_page"]] = [p.handle for p in result.pages or []] == [
                run.desk.handle("A")
            ]
        return ToolResult(call.id, result.content, is_error=result.status == "failed")

    def _watch_popup(self) -> asyncio.Future[Page]:
        """A Page the task's Page opens, as the registry registers it (registered before the call that opens it)."""
        registered: asyncio.Future[Page] = asyncio.get_running_loop().create_future()
        opener = self.run.desk.handle("A")

        def on_change(page: Page, what: str) -> None:
            if what == "registered" and page.opener_page_id == opener and not registered.done():
                registered.set_result(page)

        self.run.desk.runtime.registry.listen(on_change)
        return registered

    async def _record_popup(self, page: Page) -> None:
        listed = await self.run.agent.call(command="list_pages")
        self.run.signature.popups.append(
            {
                "opener_is_a": page.opener_page_id == self.run.desk.handle("A"),
                "authorized": page.registry_page_id in [p.handle for p in listed.pages or []],
            }
        )
        self.values["popup"] = page.registry_page_id
        self.popups.append(page)

    async def tidy(self) -> None:
        """The lab closes the popups: they are not the workspace's."""
        for page in self.popups:
            with contextlib.suppress(Exception):
                await self.run.desk.workspace.cdp.send("Target.closeTarget", {"targetId": page.cdp_target_id})


async def play(task: TaskFile, run: Run) -> None:
    """Run a task file as a model would through the script provider: each reply's references resolved by the
    provider against the results so far (as in the installed app), each call sent over MCP and recorded, the lab's
    moves made around it; a `find` is a reply of its own whose one reference resolves or does not."""
    moves = Moves(task, run)
    transcript: list[Entry] = []
    script: list[ScriptStep] = []
    for step in task.steps:
        if isinstance(step, Find):
            script += parse_steps([{"calls": [{"name": "find", "arguments": {"ref": {"$ref": list(step.ref)}}}]}])
            try:
                await ScriptProvider(script).complete("", transcript, (), _unheard)
                addressable = True
            except ProviderError:
                addressable = False
            transcript.append(AssistantTurn(""))
            run.signature.steps.append(Step(step.label, step.reqs, "find", "ok", addressable=addressable))
            continue
        script += parse_steps([await moves.fill(step)])
        reply = await ScriptProvider(script).complete("", transcript, (), _unheard)
        transcript.append(AssistantTurn(reply.text, reply.tool_calls))
        results = [await moves.call(entry, call) for entry, call in zip(step.calls, reply.tool_calls, strict=True)]
        transcript.append(ToolResults(tuple(results)))
    run.signature.facts.update(task.read_facts(run.server.requests))
    await moves.tidy()


COMMON = ("lifecycle:frame-advances-after-write", "foreground:no-focus-calls", "writes:at-most-one")
"""What every task's signature compares, whatever its steps: the new frame after each act, 0 focus calls, writes."""


def parity_task(name: str) -> Task:
    data = TaskFile.load(name)
    assert data.open is not None, f"{name}: a parity task works on a Page"
    return Task(name, data.open, (f"parity:{name}", *COMMON, *data.reqs), functools.partial(play, data),
                data.act_timeout)  # fmt: skip


TASKS: dict[str, Task] = {name: parity_task(name) for name in SCENARIOS}

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
    cost: bool = False,
) -> Signature:
    """Run `task` on `backend` with a runtime of its own (its own Pages, MCP connection and ledger attribution)
    and return its signature. `backends` replaces the runtime's backend table (negative controls only); `endpoint`
    is where the runtime connects instead of the tap's "runtime" port (a remote browser's door, through the tap).
    `cost`: this run is the one the cost summary's scenario table shows (`task-<task>-<backend>`). A figure has one
    owner: another test running the same task on real backends (the gateway allow-list check, a negative control)
    would overwrite it, last writer winning, and two shards of `make lab` would disagree on it."""
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
    if cost and backends is None and endpoint is None:  # the real backends' cost, on the local browser
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
