"""`computer-use app` in-process: the runtime, its MCP server on streamable HTTP, the console, the chat Page and the
agent loop, started and stopped together.

The agent loop reaches the runtime the way any MCP client would — over HTTP, through the app's own MCP URL — with
the first-party adapter attaching a token the app mints per call; there is no in-process shortcut on that path.
The app's own browser work is the window manager's (`host/windows.py`): it creates the console's and the Pages'
windows inside the screen's work area, with real bounds (so the relation the registry computes from geometry is the
placement the user chose), and the app registers them. The Pages feed (`host/pages.py`) keeps the console's Pages
list current from browser-level CDP only (target infos, window bounds by window id), so the console's liveliness
never touches a Page.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import uvicorn
from mcp import Client

from host.grants import GrantStore
from host.pages import PagesFeed
from host.pairing import PairingError, PairingServer, mcp_socket_path, socket_path
from host.providers import make_provider
from host.providers.base import Provider, ProviderError, ToolSpec
from host.server import DEMO_TITLE, ConsoleServer, DemoServer, EventLog
from host.settings import BACKENDS, HostSettings, InvalidSetting, SettingsStore, default_config_dir, validate
from host.turns import ConsoleRefusal, Conversation, clip
from host.windows import SIDES, Rect, Side, WindowManager
from runtime.assembly import Runtime
from runtime.browser import PrivateChromium
from runtime.cdp import CDPError
from runtime.listeners import BACKLOG, BoundedH11Protocol, ensure_descriptors
from runtime.loopback import unix_peer_uid
from runtime.models import Page
from runtime.observation import OBSERVATION_TOKENS
from runtime.registry.pages import origin
from runtime.service import Settings
from runtime.startup import StartupFailure, port_failure
from runtime.transports.client import HostedClient
from runtime.transports.mcp.http import ASGIApp, bounded_config, http_app

log = logging.getLogger(__name__)


DEMO_SCRIPT = Path(__file__).resolve().parent / "scripts" / "demo.json"
DEMO_MESSAGE = "Please subscribe me to the newsletter on the demo Page."
READY_TIMEOUT = 30.0
"""Seconds the app waits for each part to come up (MCP connection, the console's first subscription)."""

MAX_URL = 2000
CONSOLE_NOT_A_PAGE = (
    "That is this console's own address: the console is the chat, never a Page. Open the web site you want the "
    "agent to use instead."
)


def choose_provider(environ: Mapping[str, str] | None = None) -> str:
    """The default provider: anthropic if its key is set, else openai if its key is set, else the script provider."""
    env = os.environ if environ is None else environ
    if env.get("ANTHROPIC_API_KEY", "").strip():
        return "anthropic"
    if env.get("OPENAI_API_KEY", "").strip():
        return "openai"
    return "script"


@dataclass
class AppConfig:
    cdp_endpoint: str | None = None
    """Attach to this browser (`http://127.0.0.1:PORT`); None launches a private Chromium."""
    mcp_port: int = 18100
    console_port: int = 0
    provider: str | None = None
    """anthropic | openai | script; None chooses by the keys set (see `choose_provider`)."""
    model: str | None = None
    script: Path | None = None
    base_url: str | None = None
    backend: str | None = None
    """Overrides the saved backend setting for this run (not saved)."""
    observation_tokens: int = OBSERVATION_TOKENS
    """The cap of one observation, in estimated tokens (`runtime.settings.Settings.observation_tokens`)."""
    config_dir: Path | None = None
    console_dir: Path | None = None
    """Console static files from elsewhere (the suites' deliberately broken variants); None: the packaged ones."""
    open_console: bool = True
    headless: bool = True
    demo: bool = False


class StartError(StartupFailure):
    """The app could not start as configured: `what` went wrong, `todo` what to change (the command prints both as
    its one line)."""

    def __init__(self, what: str, todo: str = "start it again; if it fails the same way, please report it") -> None:
        super().__init__(what, todo)


class _MCPServer(uvicorn.Server):
    """uvicorn without its own signal handling: the app owns SIGINT/SIGTERM and stops its parts in order."""

    @contextlib.contextmanager
    def capture_signals(self):  # type: ignore[override]
        yield


class OwnerOnlyHTTP(BoundedH11Protocol):
    """The bounded HTTP protocol for the private MCP socket: a peer of another uid (`SO_PEERCRED`) is cut off as it
    connects, before a byte of its request is read. `owner_uid` is the only uid served."""

    owner_uid: int = os.getuid()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        uid = unix_peer_uid(sock) if sock is not None else None
        self.admitted = uid == self.owner_uid
        if not self.admitted:
            log.warning("MCP socket: refused a peer of uid %s", uid)
            transport.abort()
            return
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.admitted:  # a refused peer never had a connection set up to tear down
            super().connection_lost(exc)


class HostApp:
    """The parts of the app, by class: a subclass swaps one for a variant (the suites' broken ones)."""

    console_class: type[ConsoleServer] = ConsoleServer
    conversation_class: type[Conversation] = Conversation
    client_class: type[HostedClient] = HostedClient
    grants_class: type[GrantStore] = GrantStore
    pairing_class: type[PairingServer] = PairingServer
    mcp_socket_protocol: type[asyncio.Protocol] = OwnerOnlyHTTP
    event_log_class: type[EventLog] = EventLog
    window_manager_class: type[WindowManager] = WindowManager

    def __init__(self, config: AppConfig) -> None:
        self.config = config
        self.events = self.event_log_class()
        self.config_dir = config.config_dir or default_config_dir()
        self.settings_store = SettingsStore(self.config_dir, BACKENDS)
        self.console = self.console_class(self, self.events, config.console_dir)
        self.demo: DemoServer | None = None
        self.runtime: Runtime
        self.conversation: Conversation
        self.chat_page: Page | None = None
        self.mcp_url = ""
        self.grants: GrantStore
        self.pairing: PairingServer | None = None
        self._grant_timers: list[asyncio.TimerHandle] = []
        self._chromium: PrivateChromium | None = None
        self._runtime: Runtime | None = None
        self._mcp_app: ASGIApp | None = None
        self._mcp_server: _MCPServer | None = None
        self._mcp_task: asyncio.Task[None] | None = None
        self._socket_server: _MCPServer | None = None
        self._socket_task: asyncio.Task[None] | None = None
        self._client_task: asyncio.Task[None] | None = None
        self._client_stop = asyncio.Event()
        self._conversation: Conversation | None = None
        self.windows: WindowManager
        self.pages: PagesFeed
        self._notices: list[str] = []

    @property
    def console_url(self) -> str:
        return self.console.url

    @classmethod
    async def start(cls, config: AppConfig) -> HostApp:
        """Start every part; returns once MCP listens and the console Page is registered (and its script runs)."""
        app = cls(config)
        try:
            await app._start()
        except BaseException:
            await app.close()
            raise
        return app

    async def _start(self) -> None:
        config = self.config
        saved, notice = self.settings_store.load()
        if notice:
            self._notices.append(notice)
        try:
            backend = validate(config.backend, BACKENDS) if config.backend is not None else saved.backend
        except InvalidSetting as exc:
            raise StartError(str(exc), "see `computer-use app --help`") from None
        if config.cdp_endpoint is None:
            self._chromium = await PrivateChromium.launch(headless=config.headless)
        endpoint = self._chromium.endpoint if self._chromium else config.cdp_endpoint
        settings = Settings(backend=backend, observation_tokens=config.observation_tokens)
        self._runtime = self.runtime = await Runtime.connect(endpoint, settings=settings)
        self.windows = self.window_manager_class(self.runtime.cdp)
        self.pages = PagesFeed(self.runtime.registry, self.events.publish)
        client = await self._serve_mcp()
        tools = [
            ToolSpec(tool.name, tool.description or "", dict(tool.input_schema))
            for tool in (await client.list_tools()).tools
        ]
        provider: Provider | None = None
        try:
            provider = self.build_provider()
        except ProviderError as error:
            self._notices.append(error.message)
        self._conversation = self.conversation = self.conversation_class(
            host=self.runtime.host,
            registry=self.runtime.registry,
            client=self.client_class(client),
            tools=tools,
            provider=provider,
            provider_factory=self.build_provider,
            emit=self.events.publish,
            on_provider_request=self.pages.show,
        )
        self.grants = self.grants_class(self.runtime.registry, self.runtime.new_host, self.events.publish)
        self.runtime.registry.listen(self._on_page_event)
        self.runtime.cdp.listen(self.pages.on_cdp_event)
        try:
            await self.console.start(config.console_port)
        except OSError as exc:
            raise port_failure(exc, "127.0.0.1", config.console_port, "--console-port") from None
        for url in self.reserved_origins():
            self.runtime.registry.reserve(url)
        self._publish_settings()
        self.pages.show()
        await self._serve_pairing()
        self.events.publish({"type": "turn", "state": "idle"})
        self.events.publish({"type": "notice", "cause": "app", "text": " ".join(self._notices)})
        if config.open_console:
            await self._open_console()
            if self._chromium is not None:
                await self.windows.close_strays()  # Chromium's first tab, behind the console otherwise
        if config.demo:
            self.demo = await DemoServer().start()
            page = await self.open_page(self.demo.url, "left")
            if not await self.pages.until_titled(page) or DEMO_TITLE not in page.title:
                raise StartError(f"the demo Page did not load (title {page.title!r})")  # the script needs its title
            await self.send_message(DEMO_MESSAGE, [page.registry_page_id])

    def build_provider(self) -> Provider:
        """The configured provider; `ProviderError` (a missing key, say) when it cannot be made."""
        config = self.config
        name = "script" if config.demo else config.provider or choose_provider()
        script = DEMO_SCRIPT if config.demo else config.script
        return make_provider(name, model=config.model, script=script, base_url=config.base_url)

    async def _serve_mcp(self) -> Any:
        """Serve the runtime's MCP tool on 127.0.0.1 and open the app's own client connection to it."""
        ensure_descriptors()  # every listener's cap (runtime.listeners) must fit in the process's open-file limit
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # restart despite TIME_WAIT, as uvicorn does
            sock.bind(("127.0.0.1", self.config.mcp_port))
            sock.listen(BACKLOG)  # connections queue from here on, before uvicorn accepts: no wait for it to be up
        except OSError as exc:
            sock.close()
            raise port_failure(exc, "127.0.0.1", self.config.mcp_port) from None
        self.mcp_url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        self._mcp_app = self.mcp_app()
        config = bounded_config(self._mcp_app, log_level="warning", timeout_graceful_shutdown=2)
        self._mcp_server = _MCPServer(config)
        self._mcp_task = asyncio.create_task(self._mcp_server.serve(sockets=[sock]))
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        # The connection lives in a task of its own: anyio's cancel scopes must be left by the task entering them.
        self._client_task = asyncio.create_task(self._hold_client(ready))
        done, _ = await asyncio.wait(
            {ready, self._client_task, self._mcp_task}, timeout=READY_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
        )
        if ready not in done:
            for task in done:
                task.result()  # raise why it ended
            raise StartError(f"no MCP connection to {self.mcp_url} within {READY_TIMEOUT:g}s")
        return ready.result()

    def mcp_app(self) -> ASGIApp:
        """An ASGI app of the runtime's MCP server, one per listener (TCP /mcp and the private socket): each with its
        own session manager and cap, all with the one token verifier."""
        return http_app(self.runtime.server, "127.0.0.1", None)

    async def _serve_pairing(self) -> None:
        """Let `computer-use connect` pair over the private socket in the config dir, and reach MCP over the one
        beside it; without them the app still runs (the console says why third-party clients cannot connect)."""
        try:
            self.pairing = await self.pairing_class(self.grants, socket_path(self.config_dir), self.mcp_url).start()
            await self._serve_mcp_socket()
        except (PairingError, OSError) as exc:
            if self.pairing is not None:  # paired, but no MCP socket: nobody could use the pairing
                await self.pairing.close()
                self.pairing = None
            self._notices.append(f"MCP clients cannot connect through `computer-use connect`: {clip(exc, 300)}.")
        else:
            self.grants.socket = str(self.pairing.path)
        self.grants.show()

    async def _serve_mcp_socket(self) -> None:
        """The MCP app on `<config dir>/connect/mcp.sock` for `connect` alone: in the pairing's 0700 directory (this
        app holds its pairing socket, so a socket left there is stale), 0600, each peer's uid checked on accept."""
        path = mcp_socket_path(self.config_dir)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(path))
            os.chmod(path, 0o600)
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        # An app of its own, so its own session manager: a flood of sessions on TCP /mcp (any local user can
        # reach it) fills that cap, never connect's.
        config = uvicorn.Config(
            self.mcp_app(), http=self.mcp_socket_protocol, log_level="warning", timeout_graceful_shutdown=2
        )
        self._socket_server = _MCPServer(config)
        self._socket_task = asyncio.create_task(self._socket_server.serve(sockets=[sock]))

    async def _hold_client(self, ready: asyncio.Future[Client]) -> None:
        async with Client(self.mcp_url, mode="legacy") as client:
            ready.set_result(client)
            await self._client_stop.wait()

    # -- windows and Pages ----------------------------------------------------------------------------------

    def reserved_origins(self) -> list[str]:
        """The origins that are the chat, never a Page: the console's, by both names its port answers to. No Page
        opens on them, and a Page that navigates there is out of every agent's reach (`PageRegistry.reserve`)."""
        return [self.console.origin, f"http://localhost:{self.console.port}"]

    async def _open_console(self) -> None:
        # The console's proof of being the console (`host.server`, check 4): in the browser's cookie jar through
        # the app's own browser connection, before the window loads, so even its first request carries it.
        await self.runtime.cdp.send("Storage.setCookies", {"cookies": [self.console.cookie_param()]})
        target, window = await self.windows.open(self.console.url, self.windows.chat_bounds(), background=False)
        self.chat_page = await self.runtime.registry.register(target, window, workspace="main", is_chat=True)
        try:
            await asyncio.wait_for(self.console.subscribed.wait(), READY_TIMEOUT)
        except TimeoutError:
            raise StartError(f"the console did not load within {READY_TIMEOUT:g}s") from None
        if self.windows.work is not None:  # the console reported its screen before it subscribed
            await self.set_screen(self.windows.work)

    async def open_page(self, url: str, placement: str = "right") -> Page:
        """Open `url` as a new Page in a new window `placement` of the chat, inside the screen's work area (the
        chat moves or shrinks when both do not fit), and register it."""
        if placement not in SIDES:
            raise ConsoleRefusal(f"placement is one of {', '.join(SIDES)}", 400)
        if len(url) > MAX_URL or not url.startswith(("http://", "https://")):
            raise ConsoleRefusal(f"open an http:// or https:// URL (at most {MAX_URL} characters)", 400)
        if origin(url) in {origin(reserved) for reserved in self.reserved_origins()}:
            raise ConsoleRefusal(CONSOLE_NOT_A_PAGE, 400)
        bounds = await self._slot(cast(Side, placement))
        target, window = await self.windows.open(url, bounds, background=True)
        return await self.runtime.registry.register(target, window, workspace="main")  # the feed follows it

    async def _slot(self, placement: Side) -> Rect:
        """Where the new Page goes, from the chat's and the open Pages' real bounds; moves the chat if it must."""
        registry = self.runtime.registry
        if self.chat_page is None:
            return self.windows.place(self.windows.chat_bounds(), placement, []).page
        live = [p for p in registry.pages() if not p.is_chat and not registry.is_lost(p)]
        await registry.refresh([p.registry_page_id for p in live])  # the user may have moved windows
        chat = Rect.of(self.chat_page.geometry)
        others = [(registry.info(p).relation, Rect.of(p.geometry)) for p in live if not registry.is_lost(p)]
        placed = self.windows.place(chat, placement, others)
        if placed.chat != chat:
            await self._move_chat(placed.chat)
        return placed.page

    async def _move_chat(self, bounds: Rect) -> None:
        assert self.chat_page is not None
        await self.windows.move(self.chat_page.window_id, bounds)
        await self.runtime.registry.refresh([])  # the chat's geometry, read back: relations follow it

    async def set_screen(self, work: Rect) -> None:
        """The console's report of its screen's work area: the chat moves inside it if it is not."""
        self.windows.work = work
        if self.chat_page is not None:
            chat = Rect.of(self.chat_page.geometry)
            inside = self.windows.chat_bounds(chat)
            if inside != chat:
                await self._move_chat(inside)
                self.pages.show()

    async def until_titled(self, page: Page) -> bool:
        """Wait (bounded) until the Page's document has a title: True once it has (`PagesFeed.until_titled`)."""
        return await self.pages.until_titled(page)

    # -- keeping the console current ------------------------------------------------------------------------

    def _on_page_event(self, page: Page, what: str) -> None:
        if page.is_chat and what == "lost" and self._conversation is not None:
            self._conversation.chat_closed()
        self.pages.on_page_event(page, what)
        self.grants.on_page_event(page, what)

    def _publish_settings(self) -> None:
        backend = self.runtime.service.settings.backend
        self.events.publish({"type": "settings", "backend": backend, "backends": list(BACKENDS)})

    # -- the console's actions ------------------------------------------------------------------------------

    async def send_message(self, text: str, pages: list[str]) -> None:
        self.conversation.send(text, pages)

    async def decide(self, decision: str) -> None:
        self.conversation.decide(decision)

    async def new_chat(self) -> None:
        """New chat: the running turn ends, the history and the transcript empty, the provider starts afresh."""
        try:
            provider: Provider | None = self.build_provider()
        except ProviderError:
            provider = None  # the next model call tries again, and its card says why it cannot
        await self.conversation.new_chat(provider)
        self.events.new_chat()

    async def set_backend(self, backend: str) -> None:
        """The backend for new ComputerSessions from now on (live sessions keep theirs), saved for the next run."""
        try:
            validate(backend, BACKENDS)
        except InvalidSetting as exc:
            raise ConsoleRefusal(str(exc), 400) from None
        self.runtime.service.settings.backend = backend
        self._publish_settings()
        try:
            self.settings_store.save(HostSettings(backend=backend))
        except OSError as exc:
            self.events.publish(
                {
                    "type": "notice",
                    "cause": "app",
                    "text": f"The backend is set for this run but could not be saved: {exc.strerror}.",
                }
            )

    async def set_access(self, handle: str, enabled: bool) -> None:
        page = next((p for p in self.runtime.registry.pages() if p.registry_page_id == handle), None)
        if page is None or page.is_chat:
            raise ConsoleRefusal(f"{clip(handle, 40)} is not a Page of this app", 404)
        self.runtime.registry.set_access(handle, enabled)
        self.pages.show()

    async def open_url(self, url: str, placement: str, screen: Rect | None = None) -> None:
        try:
            if screen is not None:
                await self.set_screen(screen)
            await self.open_page(url, placement)
        except CDPError as exc:
            raise ConsoleRefusal(f"the browser could not open it: {clip(exc, 200)}", 502) from None

    async def refresh_pages(self, screen: Rect | None = None) -> None:
        """Re-read the Pages (the console regained focus); `screen`: its work area, as the browser reports it."""
        if screen is not None:
            await self.set_screen(screen)
        await self.pages.refresh()

    async def grant_access(self, client: str, pages: list[str], bound: str, minutes: float | None) -> None:
        """The user granted a paired MCP client these Pages, until revoked, for `minutes`, or until a Page
        changes."""
        grant = self.grants.grant(client, pages, bound, minutes)
        if grant.expires_at is not None:
            delay = max(grant.expires_at - self.grants.clock(), 0)
            self._grant_timers.append(asyncio.get_running_loop().call_later(delay + 0.05, self.grants.expire))

    async def revoke_access(self, client: str) -> None:
        self.grants.revoke(client)

    async def deny_access(self, client: str) -> None:
        self.grants.deny(client)

    # -- stopping -------------------------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop everything this app started, in order; safe to call on a partly started app."""
        if self._conversation is not None:
            await self._conversation.close()
        if self._runtime is not None:
            await self.pages.close()
        for timer in self._grant_timers:
            timer.cancel()
        if self.pairing is not None:
            await self.pairing.close()
        await self.console.close()
        if self.demo is not None:
            await self.demo.close()
        self._client_stop.set()
        if self._client_task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._client_task, 10)
        if self._socket_server is not None and self._socket_task is not None:
            self._socket_server.should_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._socket_task, 10)
            with contextlib.suppress(FileNotFoundError):
                mcp_socket_path(self.config_dir).unlink()
        if self._mcp_server is not None and self._mcp_task is not None:
            self._mcp_server.should_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._mcp_task, 10)
        if self._runtime is not None:
            if self._chromium is None:
                for target in self.windows.created:
                    with contextlib.suppress(CDPError, TimeoutError):
                        await self._runtime.cdp.send("Target.closeTarget", {"targetId": target})
            await self._runtime.close()
        if self._chromium is not None:
            await self._chromium.close()
