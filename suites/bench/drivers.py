"""The three drivers of the task-cost bench, each running a task's intent steps (`suites/bench/tasks.py`) through
real parts: our `computer_use` over the real MCP transport (a runtime of its own, the harness's Agent with host-
minted tokens), and the pinned `@playwright/mcp` and `chrome-devtools-mcp` as their docs run them (default flags,
their own tools), each spawned over stdio behind the runtime's scoped gateway bound to the task's tab.

Every answer a driver receives is metered as a model would read it (`lab.tokens.measure`: text content blocks and
images; `structuredContent` is not counted for any driver, since every server mirrors it in text), beside the
server's tool definitions once. A driver that cannot do a step, reads an error, or never sees what the task needs
marks its tally failed: such a row is FAILED, never a cost.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult

from backends.common.child_backend import node_bin
from fixtures_sites.server import FixtureServer, RequestWaiter
from lab.tap import CDPTap
from lab.tokens import measure
from lab.workspace import LabPage, Workspace
from runtime.assembly import Runtime
from runtime.capability.contexts import ProviderRequest
from runtime.gateway import ScopedGateway
from runtime.service import Settings
from runtime.transports.client import HostedClient
from suites.bench.tasks import (
    DEVTOOLS,
    OURS,
    PLAYWRIGHT,
    Click,
    ClickAt,
    Look,
    Open,
    Press,
    Read,
    Select,
    Step,
    Tally,
    Task,
    Type,
    definition_tokens,
    observe_arguments,
    resolve,
    seen,
)
from suites.harness import Agent, Desk, Seen, client_in_task

WAIT = 15.0
"""Bound on every wait the lab registers (a write arriving)."""
PAGE_WAIT = 8.0
"""Bound on a wait inside the Page (below the lab's CDP answer bound)."""
CALL_TIMEOUT = 60.0
"""Bound on one raw upstream call (its own navigation timeout is 60 s at most)."""
PAGE_ID = 1
"""chrome-devtools-mcp's id of the one page it discovers behind the gateway."""


class StepFailed(Exception):
    """The driver could not do a step; the task did not happen."""


class MeteredClient(HostedClient):
    """Our tool's client, metering every answer into the tally as the model reads it."""

    def __init__(self, client: Client, tally: Tally) -> None:
        super().__init__(client)
        self.tally = tally

    async def call(self, request: ProviderRequest, **arguments: Any) -> CallToolResult:
        result = await super().call(request, **arguments)
        cost = measure(result, structured=False)
        self.tally.add(f"computer_use {arguments.get('command')}", cost.text, cost.images)
        return result


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


# -- ours ------------------------------------------------------------------------------------------------------------


class Ours:
    """`computer_use` as a model uses it: list_pages (the host's instructions say to start there), observe a Page by
    its handle (continuing with offset only until the needle is seen), act by ref, the act answering in changes."""

    name = OURS

    def __init__(
        self,
        agent: Agent,
        handles: list[str],
        schema: dict[str, Any],
        locate: Callable[[str], Awaitable[dict[str, float]]],
        *,
        scoped: bool = True,
    ) -> None:
        self.agent = agent
        self.locate = locate
        """The lab's eyes: a point of the current Page (`ClickAt.point`) in viewport px."""
        self.handles = handles
        self.schema = schema
        self.scoped = scoped
        self.current = 0
        self.frames: dict[int, Seen] = {}
        """Page index → the latest answer that named a frame (its session, frame_id and next_offset)."""
        self.read: dict[int, list[str]] = {}
        """Page index → what the driver has read of it since its last act there."""
        self.scoped_last = False
        """The latest observe was a scoped read (it may have left out the element an act needs)."""

    async def start(self) -> None:
        await self.agent.call(command="list_pages")

    @property
    def here(self) -> list[str]:
        return self.read.setdefault(self.current, [])

    async def observe(self, step: Read | None, *, scoped: bool = False) -> Seen:
        arguments = observe_arguments(self.schema, self.handles[self.current], step, scoped=scoped)
        self.scoped_last = "query" in arguments
        first = await self.agent.call(**arguments)
        if first.status != "ok":
            raise StepFailed(f"observe: {first.status} {first.reason_code}")
        self.frames[self.current] = first
        self.here.append(first.content)
        return first

    async def more(self) -> bool:
        """Continue the current Page's frame with its next_offset; False when it has no more."""
        frame = self.frames.get(self.current)
        if frame is None or frame.next_offset is None:
            return False
        more = await self.agent.call(
            command="observe", computer_session_id=frame.computer_session_id, frame_id=frame.frame_id,
            offset=frame.next_offset,
        )  # fmt: skip
        if more.status != "ok":
            raise StepFailed(f"observe offset: {more.status} {more.reason_code}")
        frame.next_offset = more.next_offset
        self.here.append(more.content)
        return True

    async def do_read(self, step: Read) -> None:
        """Read until the needle is seen: a scoped read first where the tool offers one, and where that does not
        show it (the needle was page text no element is near), the whole frame, continued as far as needed."""
        if seen(step.needle, self.here):
            return
        scoped = self.scoped and "query" in observe_arguments(self.schema, self.handles[self.current], step)
        for scope in (True, False) if scoped else (False,):
            await self.observe(step, scoped=scope)
            while not seen(step.needle, self.here):
                if not await self.more():
                    break
            else:
                return
        raise StepFailed(f"read: {step.needle!r} not seen")

    async def do_act(self, step: Click | Type | Select | Press) -> None:
        if self.current not in self.frames:
            await self.observe(None)
        action: dict[str, Any]
        if isinstance(step, Press):
            action = {"type": "press", "key": step.key}
        else:
            ref = await self.find(step.name, step.role, step.after if isinstance(step, Click) else None)
            if isinstance(step, Click):
                action = {"type": "click", "ref": ref}
            elif isinstance(step, Type):
                action = {"type": "type", "ref": ref, "text": step.text} | ({"submit": True} if step.submit else {})
            else:
                action = {"type": "select", "ref": ref, "values": [step.value]}
        result = await self.agent.act(self.frames[self.current], **action)
        handed = not isinstance(step, Press | Select) and step.handover
        if handed and result.status == "needs_user":
            return  # the model hands the step to the user: done, and the Page is as it was
        if result.status != "ok" or handed:
            raise StepFailed(f"act {action['type']}: {result.status} {result.reason_code}")
        if result.frame_id is not None:
            self.frames[self.current] = result
        self.read[self.current] = [result.content]

    async def find(self, name: str, role: str | None, after: str | None) -> str:
        """The ref of the element named `name`: among the element lines the model knows, else further down the
        frame, else (the frame was a scoped read that left it out) in a whole read of the Page."""
        ref = resolve(self.known(), OURS, name, role, after)
        while ref is None and await self.more():
            ref = resolve(self.known(), OURS, name, role, after)
        if ref is None and self.scoped_last:
            await self.observe(None)
            ref = resolve(self.known(), OURS, name, role, after)
            while ref is None and await self.more():
                ref = resolve(self.known(), OURS, name, role, after)
        if ref is None:
            raise StepFailed(f"no element named {name!r}")
        return ref

    def known(self) -> str:
        """Every element line the model knows of the current Page's session (acts' changes applied)."""
        frame = self.frames[self.current]
        return "\n".join(self.agent.memory.get(frame.computer_session_id or "", {}).values())

    async def do_open(self, step: Open) -> None:
        self.current = step.index

    async def do_look(self, step: Look) -> None:
        first = await self.agent.call(command="observe", page=self.handles[self.current], detail="visual")
        if first.status != "ok" or not first.image:
            raise StepFailed(f"visual observe: {first.status} {first.reason_code}, image: {first.image}")
        self.frames[self.current] = first
        self.here.append(first.content)

    async def do_click_at(self, step: ClickAt) -> None:
        if self.current not in self.frames:
            raise StepFailed("a point click needs the screenshot just before it")
        point = await self.locate(step.point)
        result = await self.agent.act(self.frames[self.current], type="click", x=point["x"], y=point["y"])
        if result.status != "ok":
            raise StepFailed(f"act click at a point: {result.status} {result.reason_code}")
        if result.frame_id is not None:
            self.frames[self.current] = result
        self.read[self.current] = [result.content]

    async def confirm(self, answer: str) -> None:
        if seen(answer, [text for texts in self.read.values() for text in texts]):
            return
        frame = self.frames.get(self.current)
        if frame is None:
            raise StepFailed(f"answer {answer!r} never read")
        result = await self.agent.verify(frame, type="text_present", text=answer)
        if not result.verified:
            raise StepFailed(f"answer {answer!r} not on the Page ({result.status} {result.reason_code})")


# -- the raw upstreams -------------------------------------------------------------------------------------------------


class Raw:
    """A raw upstream driven by its own tools: a snapshot before the first act, a snapshot after every action (in
    the action's own answer where the server offers that, else one more call), a snapshot to read."""

    name: str
    SNAPSHOT_TOOL: str
    SNAPSHOT_MARK: str
    """What begins an answer's inline snapshot."""
    DIALOG_MARK: str
    """What an answer says when the action opened a dialog (no snapshot can be taken until it is handled)."""

    def __init__(self, client: Client, tally: Tally, tools: dict[str, dict[str, Any]], urls: list[str]) -> None:
        self.client = client
        self.tally = tally
        self.tools = tools
        self.urls = urls
        self.snapshot: str | None = None
        self.current = 0
        self.read: dict[int, list[str]] = {}
        """Page index → what the driver has read of it since its last act there."""

    async def start(self) -> None:
        """Nothing to list: the tab is the task's first Page."""

    @property
    def here(self) -> list[str]:
        return self.read.setdefault(self.current, [])

    async def call(self, tool: str, arguments: dict[str, Any]) -> str:
        try:
            result = await self.client.call_tool(tool, arguments, read_timeout_seconds=CALL_TIMEOUT)
        except MCPError as exc:  # no answer within the bound: the model is left waiting, the task does not happen
            raise StepFailed(f"{tool}: {exc}") from None
        cost = measure(result, structured=False)
        self.tally.add(tool, cost.text, cost.images)
        text = text_of(result)
        if result.is_error:
            raise StepFailed(f"{tool}: {' '.join(text.split())[:200]}")
        return text

    def offers(self, tool: str, parameter: str) -> bool:
        return parameter in self.tools[tool]["inputSchema"].get("properties", {})

    async def take_snapshot(self) -> None:
        text = await self.call(self.SNAPSHOT_TOOL, self.snapshot_arguments())
        self.snapshot = text
        self.here.append(text)

    def snapshot_arguments(self) -> dict[str, Any]:
        return {}

    async def after_action(self, answer: str) -> None:
        """What the model reads after an action: the answer, and a snapshot (the answer's own, else one more)."""
        self.read[self.current] = [answer]
        if self.SNAPSHOT_MARK in answer:
            self.snapshot = answer
        elif self.DIALOG_MARK not in answer:  # with a dialog open, the model's next call handles it
            await self.take_snapshot()

    async def do_read(self, step: Read) -> None:
        if seen(step.needle, self.here):
            return
        await self.take_snapshot()
        if not seen(step.needle, self.here):
            raise StepFailed(f"read: {step.needle!r} not in the snapshot")

    async def do_act(self, step: Click | Type | Select | Press) -> None:
        if self.snapshot is None:
            await self.take_snapshot()
        assert self.snapshot is not None
        ref = None
        if not isinstance(step, Press):
            ref = resolve(self.snapshot, self.name, step.name, step.role, getattr(step, "after", None))
            if ref is None:
                raise StepFailed(f"no element named {step.name!r} in the snapshot")
        await self.after_action(await self.action(step, ref))

    async def action(self, step: Click | Type | Select | Press, ref: str | None) -> str:
        raise NotImplementedError

    async def do_open(self, step: Open) -> None:
        """Navigate the tab to the task's Page `step.index`; the answer, and a snapshot, are what it reads there."""
        self.current = step.index
        self.read[self.current] = []
        await self.after_action(await self.navigate(self.urls[step.index]))

    async def navigate(self, url: str) -> str:
        raise NotImplementedError

    async def confirm(self, answer: str) -> None:
        if seen(answer, [text for texts in self.read.values() for text in texts]):
            return
        await self.take_snapshot()
        if not seen(answer, self.here):
            raise StepFailed(f"answer {answer!r} not in the snapshot")


class RawPlaywright(Raw):
    """@playwright/mcp with its defaults: every action's answer carries the whole snapshot (`--snapshot-mode full`)."""

    name = PLAYWRIGHT
    EXECUTABLE = "playwright-mcp"
    SNAPSHOT_TOOL = "browser_snapshot"
    SNAPSHOT_MARK = "### Snapshot\n```yaml"
    """0.0.83 answers an action with the code it ran and, after a navigation, a link to a snapshot file it wrote:
    the model reads the snapshot with one more call."""
    DIALOG_MARK = "### Modal state"

    async def action(self, step: Click | Type | Select | Press, ref: str | None) -> str:
        if isinstance(step, Press):
            return await self.call("browser_press_key", {"key": step.key})
        target = {"element": step.name, "target": ref}
        if isinstance(step, Click):
            return await self.call("browser_click", target)
        if isinstance(step, Type):
            return await self.call("browser_type", {**target, "text": step.text, "submit": step.submit})
        return await self.call("browser_select_option", {**target, "values": [step.value]})

    async def navigate(self, url: str) -> str:
        return await self.call("browser_navigate", {"url": url})


class RawDevtools(Raw):
    """chrome-devtools-mcp with its defaults: an action asks for the snapshot in its answer (`includeSnapshot`)
    where the tool offers that, else a `take_snapshot` follows; a typed submit is `fill`, then `press_key` Enter."""

    name = DEVTOOLS
    EXECUTABLE = "chrome-devtools-mcp"
    SNAPSHOT_TOOL = "take_snapshot"
    SNAPSHOT_MARK = "## Latest page snapshot"
    DIALOG_MARK = "# Open dialog"

    def snapshot_arguments(self) -> dict[str, Any]:
        return {"pageId": PAGE_ID}

    async def act_call(self, tool: str, arguments: dict[str, Any]) -> str:
        extra = {"includeSnapshot": True} if self.offers(tool, "includeSnapshot") else {}
        return await self.call(tool, {"pageId": PAGE_ID, **arguments, **extra})

    async def action(self, step: Click | Type | Select | Press, ref: str | None) -> str:
        if isinstance(step, Press):
            return await self.act_call("press_key", {"key": step.key})
        if isinstance(step, Click):
            return await self.act_call("click", {"uid": ref})
        if isinstance(step, Type):
            if not step.submit:
                return await self.act_call("fill", {"uid": ref, "value": step.text})
            await self.after_action(await self.act_call("fill", {"uid": ref, "value": step.text}))
            return await self.act_call("press_key", {"key": "Enter"})
        return await self.act_call("fill", {"uid": ref, "value": step.value})

    async def navigate(self, url: str) -> str:
        return await self.act_call("navigate_page", {"type": "url", "url": url})


Driver = Ours | RawPlaywright | RawDevtools


async def run_steps(driver: Driver, task: Task, tally: Tally) -> None:
    """The task's steps on `driver`; a step it cannot do fails the tally (the remaining steps are not tried)."""
    try:
        await driver.start()
        for step in task.steps:
            await do(driver, step)
    except StepFailed as failed:
        tally.fail(str(failed))


async def do(driver: Driver, step: Step) -> None:
    if isinstance(step, Read):
        await driver.do_read(step)
    elif isinstance(step, Open):
        await driver.do_open(step)
    elif isinstance(step, Look | ClickAt):
        if not isinstance(driver, Ours):  # the task set marks such tasks n/a for the raw upstreams
            raise StepFailed(f"{driver.name} has no point click with its default tools")
        await (driver.do_look(step) if isinstance(step, Look) else driver.do_click_at(step))

    else:
        await driver.do_act(step)


# -- one task on one driver, with the lab's checks ------------------------------------------------------------------


class Lab:
    """The lab's side of a task run: its Chromium, fixture server and tap, and the checks that make a row valid."""

    def __init__(self, workspace: Workspace, tap: CDPTap, server: FixtureServer, test_id: str) -> None:
        self.workspace = workspace
        self.tap = tap
        self.server = server
        self.test_id = test_id

    async def run(self, task: Task, driver: str, *, backend: str = "playwright_mcp", scoped: bool = True) -> Tally:
        """One driver's run of `task` on fresh Pages; the tally says what it cost and whether it happened."""
        tally = Tally(task, driver)
        self.server.begin_test(f"{self.test_id}[{driver}]")
        expected = task.expected_writes(driver)
        # registered before any step can trigger them; a failed run leaves them to `reset`, which rejects them
        waits = [self.server.wait_for_request(path, timeout=WAIT) for path in dict.fromkeys(expected)]
        try:
            if driver == OURS:
                await self._ours(task, tally, waits, backend, scoped)
            else:
                await self._raw(task, tally, waits, driver)
        finally:
            await self.close_popups()
            await self.workspace.close_all()
            got = [row.path for row in self.server.ledger.writes()]
            self.server.reset()
        if got != list(expected):
            tally.fail(f"ledger writes {got}, expected {list(expected)}")
        return tally

    async def _settle_and_check(self, task: Task, driver: Driver, waits: list[RequestWaiter]) -> None:
        for wait in waits:
            try:
                await wait
            except TimeoutError as late:
                raise StepFailed(str(late)) from None
        page = self.workspace.pages["P0"]
        if task.settle is not None:
            await self.wait_in_page(page, task.settle)
        if task.answer is not None:
            await driver.confirm(task.answer)
        if task.check is not None and not await self.workspace.evaluate(page, f"Boolean({task.check})"):
            raise StepFailed(f"the Page is not as the task leaves it: {task.check}")
        if task.popup:
            targets = (await self.workspace.cdp.send("Target.getTargets"))["targetInfos"]
            if not any(t.get("openerId") == page.target_id for t in targets):
                raise StepFailed("no popup opened")

    async def close_popups(self) -> None:
        """Close what the task's Pages opened (the lab tidies up: a popup is not the workspace's)."""
        openers = {page.target_id for page in self.workspace.pages.values()}
        for target in (await self.workspace.cdp.send("Target.getTargets"))["targetInfos"]:
            if target.get("openerId") in openers:
                with contextlib.suppress(Exception):
                    await self.workspace.cdp.send("Target.closeTarget", {"targetId": target["targetId"]})

    async def wait_in_page(self, page: LabPage, condition: str) -> None:
        script = f"""new Promise((resolve, reject) => {{
            const check = () => {{ try {{ return Boolean({condition}); }} catch (e) {{ return false; }} }};
            if (check()) return resolve(true);
            const timer = setTimeout(() => {{ observer.disconnect(); reject(new Error("never held")); }},
                                     {int(PAGE_WAIT * 1000)});
            const observer = new MutationObserver(() => {{
                if (check()) {{ clearTimeout(timer); observer.disconnect(); resolve(true); }}
            }});
            observer.observe(document, {{subtree: true, childList: true, characterData: true, attributes: true}});
        }})"""
        await self.workspace.evaluate(page, script, await_promise=True)

    async def _ours(self, task: Task, tally: Tally, waits: list[RequestWaiter], backend: str, scoped: bool) -> None:
        runtime = await Runtime.connect(await self.tap.endpoint("runtime"), settings=Settings(backend=backend))
        try:
            desk = Desk(self.workspace, runtime, self.server)
            columns = len(task.pages) + 1
            for index, path in enumerate(task.pages):
                await desk.open(f"P{index}", path, self.workspace.column(index, columns))
            await desk.open("chat", "/chat/", self.workspace.column(len(task.pages), columns), chat=True)
            names = [f"P{index}" for index in range(len(task.pages))]
            desk.authorize(*names)
            async with client_in_task(runtime.server) as client:
                tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True)
                         for t in (await client.list_tools()).tools]  # fmt: skip
                tally.definition = definition_tokens(tools)
                agent = Agent(MeteredClient(client, tally), desk)
                page = self.workspace.pages["P0"]

                async def locate(point: str) -> dict[str, float]:
                    return json.loads(await self.workspace.evaluate(page, f"JSON.stringify({point})"))  # type: ignore[no-any-return]

                handles = [desk.handle(n) for n in names]
                driver = Ours(agent, handles, tools[0]["inputSchema"], locate, scoped=scoped)
                await self._drive(task, driver, tally, waits)
        finally:
            await runtime.close()

    async def _raw(self, task: Task, tally: Tally, waits: list[RequestWaiter], driver: str) -> None:
        kind = RawPlaywright if driver == PLAYWRIGHT else RawDevtools
        page = await self.workspace.open("P0", self.server.url(task.pages[0]), self.workspace.column(0, 2))
        gateway = ScopedGateway(await self.tap.endpoint("raw"), page.target_id)
        try:
            endpoint = await gateway.start()
            # @playwright/mcp puts a unix socket under its sockets directory and refuses paths over 103 bytes, which a
            # pytest tmp_path exceeds: the upstream's directory is a short private one
            with tempfile.TemporaryDirectory(prefix="cu-tc-") as short:
                params = upstream_command(kind.EXECUTABLE, endpoint, Path(short))
                async with client_in_task(None, opened=lambda: Client(params, mode="legacy")) as client:
                    tools = {t.name: t.model_dump(mode="json", by_alias=True, exclude_none=True)
                             for t in (await client.list_tools()).tools}  # fmt: skip
                    tally.definition = definition_tokens(tools.values())
                    urls = [self.server.url(path) for path in task.pages]
                    await self._drive(task, kind(client, tally, tools, urls), tally, waits)
        finally:
            await gateway.close()

    async def _drive(self, task: Task, driver: Driver, tally: Tally, waits: list[RequestWaiter]) -> None:
        await run_steps(driver, task, tally)
        if tally.failure is None:
            try:
                await self._settle_and_check(task, driver, waits)
            except StepFailed as failed:
                tally.fail(str(failed))


def upstream_command(executable: str, endpoint: str, workdir: Path) -> StdioServerParameters:
    """The pinned npm server as its docs run it (default flags), attached to the gateway: the endpoint goes in its
    config file (0600, never a flag: it carries the gateway's secret), with a private HOME and telemetry off."""
    workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
    config = workdir / "config.json"
    if executable == RawPlaywright.EXECUTABLE:
        body: dict[str, Any] = {"browser": {"cdpEndpoint": endpoint}}
        args = ["--config", str(config), "--output-dir", str(workdir / "output")]
    else:
        body = {"browserUrl": endpoint}
        args = ["--config", str(config)]
    fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        json.dump(body, file)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(workdir),
        "TMPDIR": str(workdir),
        "PWTEST_SOCKETS_DIR": str(workdir / "s"),
        "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1",
        "CHROME_DEVTOOLS_MCP_NO_USAGE_STATISTICS": "1",
        "CHROME_DEVTOOLS_MCP_NO_UPDATE_CHECKS": "1",
        "CHROME_DEVTOOLS_MCP_NO_CONFIG_DISCOVERY": "1",
    }
    return StdioServerParameters(command=str(node_bin() / executable), args=args, env=env, cwd=str(workdir))
