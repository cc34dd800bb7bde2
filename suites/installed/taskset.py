"""The task set (`suites/tasks/<scenario>.json`, the parity tasks' own data), run on the installed app from its
console: one turn per fixture scenario, then the backend switch, then a negative-control turn — all in one app,
one script.

A task file is one turn: its Page (`open`, opened through the console's own open form, left of the chat, its
`task=<name>` query what the script's `$page` / `$session` / `$frame` references find), the user's `message`, its
replies as the script provider's steps (host/providers/script.py; `find` steps are no tool calls and are left out),
each call's outcome as the console's card shows it — `status` (the card's `data-status`) and `reason` (the reason
code that starts the card's `.reason`; none when absent) — and the ledger paths it writes, in order, once each.
Where the app cannot do what the parity runner does, the call says what the app sends and expects instead
(`installed`, with why: the popup's handle, the stall's act timeout); the lab's moves this runner makes are the
stall's held page and the popup's checks in the console (`hold`, `popup`), and the facts read off the ledger. Values
the lab only knows at run time are `{"$lab": "..."}` (a fixture URL, the canvas seat's point, measured in a window
of the console's size) and are filled in before the app starts. The script provider takes one script per app, and
its next step is the number of model replies so far in the conversation; so the turns' steps are concatenated,
each turn closed by a step without calls that says `Done: <name>.` (what the lab waits for to know the turn ended).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fixtures_sites.server import FixtureServer
from lab.cdp import CDPClient
from lab.processes import command_line
from lab.tap import CDPTap
from lab.workspace import Bounds, Workspace
from suites.console_driver import UI_TIMEOUT, ConsoleDriver
from suites.harness import BACKENDS
from suites.installed.conftest import AppProcess, Installed, page_targets, tidy_windows
from suites.tasks.taskfile import CANVAS_RECT, SCENARIOS, TaskFile, seat_point

SWITCH = ("switch_paused", "switch_next")
CONTROL = "control_decoy"
DECOY = "/catalogue/?q=Northwind+Pro+Trail+Running+Shoe+Ochre&task=decoy"
"""A Page open (right of the chat) the whole run and never ticked — until the negative-control turn."""
CONSOLE_SIZE = Bounds(0, 0, 760, 900)
"""The size of the app's windows (its console's, and each Page's slot beside it)."""
TURN_TIMEOUT = 90.0
"""Seconds the lab waits for a turn to pause or end (a backend child may start within it)."""
LABEL = "installed"
"""The tap label of the installed app's CDP connection (its runtime, gateways and backends)."""
INSTALLED = "installed"
"""The runner, as the task files name it."""


@dataclass(frozen=True)
class Task:
    """A task file as a turn in the console."""

    file: TaskFile

    @classmethod
    def load(cls, name: str) -> Task:
        return cls(TaskFile.load(name))

    @property
    def name(self) -> str:
        return self.file.scenario

    @property
    def open(self) -> str | None:
        return self.file.open

    @property
    def message(self) -> str:
        return self.file.message

    @property
    def writes(self) -> list[str]:
        return list(self.file.writes)

    @property
    def marker(self) -> str:
        return f"Done: {self.name}."

    @property
    def needle(self) -> str:
        return f"task={self.name}" if self.open else "task=decoy"

    def expected(self) -> list[list[dict[str, str]]]:
        """Per step, the outcome of each call: {"status": ..., "reason": code} (no reason: none)."""
        return [[call.expected(INSTALLED) for call in reply.calls] for reply in self.file.replies()] + [[]]

    def script(self, lab: dict[str, Any]) -> list[dict[str, Any]]:
        """The steps as the script provider reads them: `$lab` values filled in, and a closing step without calls."""
        return [*(reply.script(INSTALLED, lab) for reply in self.file.replies()), {"say": self.marker}]

    def lab_names(self) -> set[str]:
        return {name for reply in self.file.replies() for name in reply.lab_names(INSTALLED)}


def compose(tasks: list[Task], lab: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for task in tasks for step in task.script(lab)]


@dataclass(frozen=True)
class Card:
    call_id: str
    status: str
    command: str
    backend: str
    reason: str
    page: str

    @property
    def outcome(self) -> dict[str, str]:
        code = self.reason.split(":", 1)[0].strip()
        return {"status": self.status, "reason": code} if code else {"status": self.status}


@dataclass
class TurnRecord:
    """One turn as the user saw it in the console, and as the lab's instruments measured it."""

    task: str
    target: str | None
    frames: set[str] = field(default_factory=set)
    """The ticked Page's targets: its own and its out-of-process iframes'."""
    steps: list[list[Card]] = field(default_factory=list)
    """The cards of each assistant message of the turn (one message per model reply), in order."""
    pauses: int = 0
    calls: dict[str, Counter[str]] = field(default_factory=dict)
    """CDP commands of the installed app during the turn, per target (browser-level traffic under "browser")."""
    writes: list[str] = field(default_factory=list)
    referers: list[str] = field(default_factory=list)
    attacker_hits: int = 0
    facts: dict[str, Any] = field(default_factory=dict)

    def outcomes(self) -> list[list[dict[str, str]]]:
        return [[card.outcome for card in step] for step in self.steps]

    def cards(self) -> list[Card]:
        return [card for step in self.steps for card in step]

    def elsewhere(self, allowed: set[str]) -> dict[str, dict[str, int]]:
        """Calls on any Page but `allowed` ("browser" is browser-level traffic that names no Page).

        `Target.detachFromTarget` is left out: it is the runtime letting go of a session it held on a Page of an
        earlier turn (a turn's sessions close when it ends), a browser-level call that reaches no Page; any attach
        or command on that Page would still count."""
        return {
            t: methods
            for t, counter in self.calls.items()
            if t not in allowed | {"browser"}
            and (methods := {m: n for m, n in counter.items() if m != "Target.detachFromTarget"})
        }

    def outside(self) -> dict[str, dict[str, int]]:
        """Calls on anything but the ticked Page (and its iframes)."""
        return self.elsewhere(self.frames | ({self.target} if self.target else set()))


@dataclass
class TaskSetRun:
    backend: str
    switched_to: str
    lines: list[str]
    turns: dict[str, TurnRecord] = field(default_factory=dict)
    chat_calls: dict[str, int] = field(default_factory=dict)
    """Commands on the chat (console) Page from the app, from its URLs printed to Ctrl-C."""
    decoy_calls: dict[str, int] = field(default_factory=dict)
    """Commands on the decoy Page from the app, from its opening to the negative-control turn."""
    decoy_target: str = ""
    app_command: str = ""
    """The running app's command line, as /proc shows it."""
    exit_code: int | None = None
    processes_seen: int = 0
    processes_left: list[str] = field(default_factory=list)
    backend_children_seen: int = 0


def calls_between(tap: CDPTap, start: int, end: int) -> dict[str, Counter[str]]:
    table: dict[str, Counter[str]] = {}
    for record in tap.records[start:end]:
        if record.kind == "command" and record.label == LABEL:
            table.setdefault(record.target, Counter())[record.method] += 1
    return table


def next_backend(backend: str) -> str:
    return BACKENDS[(BACKENDS.index(backend) + 1) % len(BACKENDS)]


async def measure_seats(lab_cdp: CDPClient, server: FixtureServer, tasks: list[Task]) -> dict[str, float]:
    """`seat.x` / `seat.y`: the seat's viewport point, measured by the lab's eyes in a window the size of the app's."""
    seated = [task for task in tasks if task.file.seat is not None]
    if not seated:
        return {}
    (task,) = seated  # one seat's point per script
    assert task.open is not None
    assert task.file.seat is not None
    workspace = Workspace(lab_cdp, "installed-measure", area=CONSOLE_SIZE)
    try:
        page = await workspace.open("canvas", server.url(task.open), CONSOLE_SIZE)
        rect = json.loads(await workspace.evaluate(page, CANVAS_RECT))
    finally:
        await workspace.close_all()
    return seat_point(rect, task.file.seat)


async def frame_targets(lab_cdp: CDPClient, page: str) -> set[str]:
    """The Page's own targets: its own, and those of its out-of-process iframes (a cross-site iframe is a target
    of its own, and the tap attributes a backend's reads of it there), transitively."""
    infos = (await lab_cdp.send("Target.getTargets"))["targetInfos"]
    own, grew = {page}, True
    while grew:
        more = {t["targetId"] for t in infos if t["type"] == "iframe" and t.get("parentFrameId") in own} - own
        own |= more
        grew = bool(more)
    return own


async def until_loaded(lab_cdp: CDPClient, target: str) -> None:
    """Wait (bounded) until the Page's document has loaded, through the lab's eyes (never through the tap)."""
    attached = await lab_cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})
    try:
        await lab_cdp.send(
            "Runtime.evaluate",
            {
                "expression": "new Promise((r) => document.readyState === 'complete' ? r(true)"
                " : addEventListener('load', () => r(true)))",
                "awaitPromise": True,
            },
            session_id=attached["sessionId"],
            timeout=UI_TIMEOUT,
        )
    finally:
        await lab_cdp.send("Target.detachFromTarget", {"sessionId": attached["sessionId"]})


class Driver:
    """The user at the console, with the lab's instruments beside them."""

    def __init__(
        self, app: AppProcess, console: ConsoleDriver, lab_cdp: CDPClient, tap: CDPTap, server: FixtureServer
    ) -> None:
        self.app = app
        self.console = console
        self.lab_cdp = lab_cdp
        self.tap = tap
        self.server = server

    async def open(self, url: str, placement: str = "left") -> tuple[str, str]:
        """Open `url` through the console's form; returns (handle, target id) once the console lists it."""
        handle = await self.console.open_url(url, placement)
        listed = json.dumps(f'#pages li.page[data-page="{handle}"] .url')
        await self.console.until(
            f"document.querySelector({listed})?.textContent === {json.dumps(url)}", f"{url} listed"
        )
        targets = [t for t, u in (await page_targets(self.lab_cdp)).items() if u == url]
        assert len(targets) == 1, f"expected one window showing {url}: {targets}"
        await until_loaded(self.lab_cdp, targets[0])
        return handle, targets[0]

    async def close(self, handle: str, target: str) -> None:
        """The user closes the Page's window; returns once the console no longer lists it."""
        await self.lab_cdp.send("Target.closeTarget", {"targetId": target})
        await self.console.until(
            f"!document.querySelector('#pages li.page[data-page={json.dumps(handle)}]')", f"{handle} leaving the list"
        )

    async def send(self, message: str, handles: list[str]) -> int:
        """Tick exactly these Pages, type the message, press Send; returns the index of the user's message in the
        history once the console shows it."""
        users = await self.console.evaluate("document.querySelectorAll('#history article.message').length")
        await self.console.send(message, handles)
        await self.console.until(
            f"document.querySelectorAll('#history article.message').length > {users}", "the message being sent"
        )
        return users

    async def until_paused_or_done(self, marker: str, paused_before: int) -> str:
        """Wait until the turn waits for the user on a new needs_user card ("paused") or ends with `marker`."""
        return await self.console.until(
            f"""(() => {{
                const state = document.getElementById('turn').dataset.state;
                const messages = [...document.querySelectorAll('#history article.message[data-role=assistant]')];
                const last = messages[messages.length - 1];
                if (state === 'idle' && last && last.querySelector('.body').textContent.includes({json.dumps(marker)}))
                  return 'done';
                const waiting = document.querySelectorAll('article.card[data-status=needs_user]').length;
                const open = 'article.card[data-status=needs_user]:not([data-resolved]) button.continue';
                if (state === 'needs_user' && waiting > {paused_before} && document.querySelector(open))
                  return 'paused';
                if (state === 'error') return 'error';
                // A provider error no retry can fix ends the turn at once: its card is the error.
                if (state === 'idle' && last && last.querySelector('article.card.provider-error')) return 'error';
                return null;
            }})()""",
            f"the turn reaching {marker!r} or a needs_user pause",
            TURN_TIMEOUT,
        )

    async def press_continue(self) -> None:
        """Press "Done — continue" on the card that waits for the user."""
        await self.console.click("article.card[data-status=needs_user]:not([data-resolved]) button.continue")

    async def needs_user_cards(self) -> int:
        return await self.console.evaluate("document.querySelectorAll('article.card[data-status=needs_user]').length")

    async def turn_cards(self, first_message: int) -> list[list[Card]]:
        snapshot = await self.console.snapshot()
        messages = snapshot["messages"][first_message:]
        assert messages, "no message in the history"
        assert messages[0]["role"] == "user", messages[:1]
        return [
            [
                Card(**{k: c[k] for k in ("call_id", "status", "command", "backend", "reason", "page")})
                for c in m["cards"]
            ]
            for m in messages[1:]
            if m["role"] == "assistant"
        ]


Hook = Callable[[Driver, TurnRecord], Awaitable[None]]
"""What the lab does during a turn: at a needs_user pause (`on_pause`), or right after Send (`hold`)."""


async def run_turn(
    driver: Driver,
    task: Task,
    handles: list[str],
    target: str | None,
    *,
    on_pause: Hook | None = None,
    hold: Hook | None = None,
) -> TurnRecord:
    """One turn, as a user: tick, type, Send, press Continue on every needs_user card; instruments around it."""
    record = TurnRecord(task.name, target)
    writes_before = len(driver.server.ledger.writes())
    hits_before = len(driver.server.ledger.attacker_hits())
    paused = await driver.needs_user_cards()
    if target is not None:  # an iframe may go with a navigation during the turn: its frames before and after
        record.frames = await frame_targets(driver.lab_cdp, target)
    start = len(driver.tap.records)
    first = await driver.send(task.message, handles)
    if hold is not None:
        await hold(driver, record)
    while (state := await driver.until_paused_or_done(task.marker, paused)) == "paused":
        record.pauses += 1
        paused += 1
        driver.app.note_processes()
        if on_pause is not None:
            await on_pause(driver, record)
        await driver.press_continue()
    assert state == "done", f"{task.name}: the turn ended in state {state}: {await driver.console.snapshot()}"
    record.calls = calls_between(driver.tap, start, len(driver.tap.records))
    if target is not None:
        record.frames |= await frame_targets(driver.lab_cdp, target)
    driver.app.note_processes()
    rows = driver.server.ledger.writes()[writes_before:]
    record.writes = [row.path for row in rows]
    record.referers = [row.referer for row in rows]
    record.attacker_hits = len(driver.server.ledger.attacker_hits()) - hits_before
    record.steps = await driver.turn_cards(first)
    return record


# -- what the lab does beside particular scenarios -----------------------------------------------------------------


def holding(path: str, action: str) -> Hook:
    """`hold`: the page at `path` is held; the card of the `action` that asks for it must show `running` until the
    lab lets it go (the app has no act timeout short enough to wait for)."""

    async def hold(driver: Driver, record: TurnRecord) -> None:
        held = driver.server.stall(path)
        await held.started(TURN_TIMEOUT)
        running = await driver.console.until(
            "[...document.querySelectorAll('article.card[data-status=running] .command')]"
            f".some((c) => c.textContent.includes({json.dumps(action)}))",
            f"the {action} card showing running while the page is held",
        )
        record.facts["running_while_held"] = bool(running) and held.holding
        held.release(text="<title>late</title>", content_type="text/html")

    return hold


async def check_popup(driver: Driver, record: TurnRecord, handle: str, before: set[str], where: str) -> None:
    """`popup`: one new window, listed in the console's Pages (a Page under `where` but the task's) unticked; the lab
    closes it as the user would."""
    new = set(await page_targets(driver.lab_cdp)) - before
    record.facts["popup_windows"] = len(new)
    listed = await driver.console.until(
        f"""(() => {{ const rows = [...document.querySelectorAll('#pages li.page')]
             .filter((li) => li.dataset.page !== {json.dumps(handle)} && li.querySelector('.url').textContent
               .includes({json.dumps(where)}));
             return rows.length ? rows.map((li) => ({{handle: li.dataset.page,
               ticked: document.querySelector(`#turn-pages input[data-page="${{li.dataset.page}}"]`).checked}}))
               : null; }})()""",
        "the popup in the console's Pages list",
    )
    record.facts["popup_listed"] = len(listed)
    record.facts["popup_ticked"] = any(row["ticked"] for row in listed)
    if len(listed) == 1 and len(new) == 1:
        popup = new.pop()
        # The runtime registers the popup as a new Page: one browser-level lookup of its window by target id,
        # which the tap attributes to the popup. Shown as a fact, so that anything else on it still counts.
        record.facts["popup_calls"] = dict(record.calls.pop(popup, Counter()))
        await driver.close(listed[0]["handle"], popup)


async def scenario_turn(driver: Driver, task: Task) -> TurnRecord:
    """Open the scenario's Page left of the chat, run its turn on it alone with the lab's moves its calls ask for,
    read its facts, and close the Page (as the user would close its window)."""
    assert task.open is not None
    handle, target = await driver.open(driver.server.url(task.open))
    before = set(await page_targets(driver.lab_cdp))
    held = [(c.lab["hold"], c.arguments_for(INSTALLED)["action"]["type"]) for c in task.file.calls() if "hold" in c.lab]
    assert len(held) <= 1, f"{task.name}: one held page per turn (the hook watches one card)"
    for path, _ in held:
        driver.server.stall(path)  # registered before the turn: the answer is held on arrival
    record = await run_turn(driver, task, [handle], target, hold=holding(*held[0]) if held else None)
    if task.file.moves("popup"):
        await check_popup(driver, record, handle, before, task.open.split("?")[0])
    record.facts.update(task.file.read_facts(driver.server.requests))
    await driver.close(handle, target)
    return record


async def run_task_set(
    installed: Installed, tap: CDPTap, lab_cdp: CDPClient, server: FixtureServer, backend: str, tmp: Path
) -> TaskSetRun:
    """Start the installed app once on `backend` and run every task from its console; then Ctrl-C and audit."""
    tasks = {name: Task.load(name) for name in (*SCENARIOS, *SWITCH, CONTROL)}
    lab = await measure_seats(lab_cdp, server, list(tasks.values()))
    urls = {name for task in tasks.values() for name in task.lab_names() if name.startswith("url:")}
    lab.update({name: server.url(name.removeprefix("url:")) for name in urls})
    script = tmp / "task-set.json"
    script.write_text(json.dumps(compose(list(tasks.values()), lab), indent=1), encoding="utf-8")
    config_dir = tmp / "config"
    switched_to = next_backend(backend)
    async with tidy_windows(lab_cdp):
        app = await AppProcess.start(
            installed,
            cdp_endpoint=await tap.endpoint(LABEL),
            config_dir=config_dir,
            script=script,
            backend=backend,
            log=tmp / "app.log",
        )
        run = TaskSetRun(backend, switched_to, list(app.lines), app_command=command_line(app.pid))
        console: ConsoleDriver | None = None

        def audit(label: str) -> None:
            # A session that starts and ends within one turn (the switched backend's, with no pause) has its
            # backend's process alive for certain only while that process is connecting through the app's gateway.
            if label == LABEL and app.process.returncode is None:
                app.note_processes()

        try:
            with tap.on_connect(audit):
                console = await ConsoleDriver.attach(lab_cdp, app.console_url)
                ready = len(tap.records)
                driver = Driver(app, console, lab_cdp, tap, server)
                decoy, decoy_target = await driver.open(server.url(DECOY), "right")
                run.decoy_target = decoy_target
                decoy_frames = await frame_targets(lab_cdp, decoy_target)
                decoy_from = len(tap.records)
                for name in SCENARIOS:
                    run.turns[name] = await scenario_turn(driver, tasks[name])
                run.turns.update(await switch_backend(driver, tasks, switched_to, config_dir))
                control_from = len(tap.records)
                run.turns[CONTROL] = await run_turn(driver, tasks[CONTROL], [decoy], decoy_target)
                stop = len(tap.records)
                run.chat_calls = dict(calls_between(tap, ready, stop).get(console.target_id, Counter()))
                decoy_window = calls_between(tap, decoy_from, control_from)
                run.decoy_calls = dict(sum((decoy_window.get(t, Counter()) for t in decoy_frames), Counter()))
                await console.detach()
                run.exit_code = await app.interrupt()
                left = await app.settled()
                run.processes_seen = len(app.seen)
                children = [s for s in app.seen.values() if "node" in s.command or "mcp" in s.command]
                run.backend_children_seen = len(children)
                run.processes_left = [f"{s.pid} {s.command[:120]}" for s in left]
        except BaseException:
            print(f"--- the app's stderr ---\n{app.stderr_tail()}")
            raise
        finally:
            if app.process.returncode is None:
                await app.kill()
    return run


async def switch_backend(
    driver: Driver, tasks: dict[str, Task], switched_to: str, config_dir: Path
) -> dict[str, TurnRecord]:
    """A turn pauses on a sign-in; meanwhile the user picks another backend and presses Continue; the next turn
    observes a new Page."""

    async def pick_backend(driver: Driver, record: TurnRecord) -> None:
        if record.pauses != 1:
            return
        await driver.lab_cdp.send("Network.enable", session_id=driver.console.session)
        try:
            answered = driver.lab_cdp.wait_for_event(
                "Network.responseReceived",
                session_id=driver.console.session,
                predicate=lambda p: p["response"]["url"].endswith("/api/settings"),
                timeout=UI_TIMEOUT,
            )
            await driver.console.choose("#backend", switched_to)
            record.facts["settings_status"] = (await answered)["response"]["status"]
        finally:
            await driver.lab_cdp.send("Network.disable", session_id=driver.console.session)
        record.facts["saved"] = json.loads((config_dir / "settings.json").read_text(encoding="utf-8"))["backend"]

    records = {}
    paused = tasks["switch_paused"]
    assert paused.open is not None
    handle, target = await driver.open(driver.server.url(paused.open))
    records[paused.name] = await run_turn(driver, paused, [handle], target, on_pause=pick_backend)
    nxt = tasks["switch_next"]
    assert nxt.open is not None
    handle2, target2 = await driver.open(driver.server.url(nxt.open))
    records[nxt.name] = await run_turn(driver, nxt, [handle2], target2)
    await driver.close(handle, target)
    await driver.close(handle2, target2)
    return records
