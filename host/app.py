"""`computer-use app` in-process: the runtime, its MCP server on streamable HTTP, the console, the chat Page and the
agent loop, started and stopped together.

The agent loop reaches the runtime the way any MCP client would — over HTTP, through the app's own MCP URL — with
the first-party adapter attaching a token the app mints per call; there is no in-process shortcut on that path.
The app's own browser work is the window manager's (`host/windows.py`): it creates the console's and the Pages'
windows inside the screen's work area, with real bounds (so the relation the registry computes from geometry is the
placement the user chose), and the app registers them. The Pages feed (`host/pages.py`) keeps the console's Pages
list current from browser-level CDP only (target infos, window bounds by window id), so the console's liveliness
never touches a Page. The MCP listeners are `host/serving.py`'s; what each console route does is `ConsoleAPI`'s.
Every part is made from `HostParts`, so a suite passes a deliberately broken one in the constructor.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from host.grants import GrantStore
from host.pages import PagesFeed
from host.pairing import PairingError, PairingServer, mcp_socket_path, socket_path
from host.providers import make_provider
from host.providers.base import Provider, ProviderError, ToolSpec
from host.server import DEMO_TITLE, ConsoleServer, DemoServer, EventLog
from host.serving import READY_TIMEOUT, MCPListeners, OwnerOnlyHTTP, StartError
from host.settings import BACKENDS, HostSettings, InvalidSetting, SettingsStore, default_config_dir, validate
from host.turns import ConsoleRefusal, Conversation, clip
from host.windows import SIDES, Rect, Side, WindowManager
from runtime.assembly import Runtime
from runtime.browser import PrivateChromium
from runtime.cdp import CDPError
from runtime.models import Page
from runtime.observation import OBSERVATION_TOKENS
from runtime.registry.pages import UnknownPage, origin
from runtime.service import Settings
from runtime.startup import port_failure
from runtime.transports.client import HostedClient

DEMO_SCRIPT = Path(__file__).resolve().parent / "scripts" / "demo.json"
DEMO_MESSAGE = "Please subscribe me to the newsletter on the demo Page."

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
    open_console: bool = True
    headless: bool = True
    demo: bool = False


@dataclass(frozen=True)
class HostParts:
    """What the app is made of, one part a field: the app makes each from the class given here. A suite passes a
    variant of one (a deliberately broken console, grant store, window manager...) in `HostApp`'s constructor."""

    console: type[ConsoleServer] = ConsoleServer
    console_dir: Path | None = None
    """The console's static files; None: the packaged ones (a suite passes a deliberately broken copy)."""
    conversation: type[Conversation] = Conversation
    client: type[HostedClient] = HostedClient
    """The first-party adapter the agent loop calls the runtime's MCP tool through."""
    grants: type[GrantStore] = GrantStore
    pairing: type[PairingServer] = PairingServer
    event_log: type[EventLog] = EventLog
    window_manager: type[WindowManager] = WindowManager
    mcp: type[MCPListeners] = MCPListeners
    mcp_socket_protocol: type[asyncio.Protocol] = OwnerOnlyHTTP
    """The HTTP protocol of the private MCP socket (`connect`'s): the default checks each peer's uid."""


class HostApp:
    """The app's process: makes its parts (`HostParts`), starts them in order, wires their events to one another,
    opens the console's and the Pages' windows, and stops everything in order."""

    def __init__(self, config: AppConfig, parts: HostParts | None = None) -> None:
        self.config = config
        self.parts = parts or HostParts()
        self.events = self.parts.event_log()
        self.config_dir = config.config_dir or default_config_dir()
        self.settings_store = SettingsStore(self.config_dir, BACKENDS)
        self.api = ConsoleAPI(self)
        self.console = self.parts.console(self.api, self.events, self.parts.console_dir)
        self.demo: DemoServer | None = None
        self.runtime: Runtime
        self.conversation: Conversation
        self.chat_page: Page | None = None
        self.mcp: MCPListeners | None = None
        self.grants: GrantStore
        self.pairing: PairingServer | None = None
        self.windows: WindowManager
        self.pages: PagesFeed
        self._chromium: PrivateChromium | None = None
        self._runtime: Runtime | None = None
        self._conversation: Conversation | None = None
        self._notices: list[str] = []

    @property
    def console_url(self) -> str:
        return self.console.url

    @property
    def mcp_url(self) -> str:
        """The runtime's MCP endpoint on TCP (`http://127.0.0.1:PORT/mcp`); "" until it listens."""
        return self.mcp.url if self.mcp is not None else ""

    @classmethod
    async def start(cls, config: AppConfig, parts: HostParts | None = None) -> HostApp:
        """Start every part; returns once MCP listens and the console Page is registered (and its script runs)."""
        app = cls(config, parts)
        try:
            await app._start()
        except BaseException:
            await app.close()
            raise
        return app

    async def _start(self) -> None:
        config, parts = self.config, self.parts
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
        self.windows = parts.window_manager(self.runtime.cdp)
        self.pages = PagesFeed(self.runtime.registry, self.events.publish)
        self.mcp = parts.mcp(self.runtime.server, parts.mcp_socket_protocol)
        client = await self.mcp.serve(config.mcp_port)
        tools = [
            ToolSpec(tool.name, tool.description or "", dict(tool.input_schema))
            for tool in (await client.list_tools()).tools
        ]
        provider: Provider | None = None
        try:
            provider = self.build_provider()
        except ProviderError as error:
            self._notices.append(error.message)
        self._conversation = self.conversation = parts.conversation(
            host=self.runtime.host,
            registry=self.runtime.registry,
            client=parts.client(client),
            tools=tools,
            provider=provider,
            provider_factory=self.build_provider,
            emit=self.events.publish,
            on_provider_request=self.pages.show,
        )
        self.grants = parts.grants(self.runtime.registry, self.runtime.new_host, self.events.publish)
        self.runtime.registry.listen(self._on_page_event)
        self.runtime.cdp.listen(self.pages.on_cdp_event)
        try:
            await self.console.start(config.console_port)
        except OSError as exc:
            raise port_failure(exc, "127.0.0.1", config.console_port, "--console-port") from None
        for url in self.console.reserved_origins():
            self.runtime.registry.reserve(url)
        self.api.publish_settings()
        self.pages.show()
        await self._serve_pairing(self.mcp)
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
            self.conversation.send(DEMO_MESSAGE, [page.registry_page_id])

    def build_provider(self) -> Provider:
        """The configured provider; `ProviderError` (a missing key, say) when it cannot be made."""
        config = self.config
        name = "script" if config.demo else config.provider or choose_provider()
        script = DEMO_SCRIPT if config.demo else config.script
        return make_provider(name, model=config.model, script=script, base_url=config.base_url)

    async def _serve_pairing(self, mcp: MCPListeners) -> None:
        """Let `computer-use connect` pair over the private socket in the config dir, and reach MCP over the one
        beside it; without them the app still runs (the console says why third-party clients cannot connect)."""
        try:
            self.pairing = await self.parts.pairing(self.grants, socket_path(self.config_dir), mcp.url).start()
            await mcp.serve_socket(mcp_socket_path(self.config_dir))
        except (PairingError, OSError) as exc:
            if self.pairing is not None:  # paired, but no MCP socket: nobody could use the pairing
                await self.pairing.close()
                self.pairing = None
            self._notices.append(f"MCP clients cannot connect through `computer-use connect`: {clip(exc, 300)}.")
        else:
            self.grants.socket = str(self.pairing.path)
        self.grants.show()

    # -- windows and Pages ----------------------------------------------------------------------------------

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
        if origin(url) in {origin(reserved) for reserved in self.console.reserved_origins()}:
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

    def _on_page_event(self, page: Page, what: str) -> None:
        if page.is_chat and what == "lost" and self._conversation is not None:
            self._conversation.chat_closed()
        self.pages.on_page_event(page, what)
        self.grants.on_page_event(page, what)

    # -- stopping -------------------------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop everything this app started, in order; safe to call on a partly started app."""
        if self._conversation is not None:
            await self._conversation.close()
        if self._runtime is not None:
            await self.pages.close()
        self.api.close()
        if self.pairing is not None:
            await self.pairing.close()
        await self.console.close()
        if self.demo is not None:
            await self.demo.close()
        if self.mcp is not None:
            await self.mcp.close()
        if self._runtime is not None:
            if self._chromium is None:
                for target in self.windows.created:
                    with contextlib.suppress(CDPError, TimeoutError):
                        await self._runtime.cdp.send("Target.closeTarget", {"targetId": target})
            await self._runtime.close()
        if self._chromium is not None:
            await self._chromium.close()


class ConsoleAPI:
    """What each route of the console's API does to the app's parts (`host.server.ConsoleActions`), and the timers
    that end the grants given there. Each raises `ConsoleRefusal` with a message for the user."""

    def __init__(self, app: HostApp) -> None:
        self.app = app
        self._grant_timers: list[asyncio.TimerHandle] = []

    def publish_settings(self) -> None:
        backend = self.app.runtime.service.settings.backend
        self.app.events.publish({"type": "settings", "backend": backend, "backends": list(BACKENDS)})

    async def send_message(self, text: str, pages: list[str]) -> None:
        self.app.conversation.send(text, pages)

    async def decide(self, decision: str) -> None:
        self.app.conversation.decide(decision)

    async def new_chat(self) -> None:
        """New chat: the running turn ends, the history and the transcript empty, the provider starts afresh."""
        try:
            provider: Provider | None = self.app.build_provider()
        except ProviderError:
            provider = None  # the next model call tries again, and its card says why it cannot
        await self.app.conversation.new_chat(provider)
        self.app.events.new_chat()

    async def set_backend(self, backend: str) -> None:
        """The backend for new ComputerSessions from now on (live sessions keep theirs), saved for the next run."""
        try:
            validate(backend, BACKENDS)
        except InvalidSetting as exc:
            raise ConsoleRefusal(str(exc), 400) from None
        self.app.runtime.service.settings.backend = backend
        self.publish_settings()
        try:
            self.app.settings_store.save(HostSettings(backend=backend))
        except OSError as exc:
            self.app.events.publish(
                {
                    "type": "notice",
                    "cause": "app",
                    "text": f"The backend is set for this run but could not be saved: {exc.strerror}.",
                }
            )

    async def set_access(self, handle: str, enabled: bool) -> None:
        registry = self.app.runtime.registry
        try:
            page: Page | None = registry.get(handle)
        except UnknownPage:
            page = None
        if page is None or page.is_chat:
            raise ConsoleRefusal(f"{clip(handle, 40)} is not a Page of this app", 404)
        registry.set_access(handle, enabled)
        self.app.pages.show()

    async def open_url(self, url: str, placement: str, screen: Rect | None = None) -> None:
        try:
            if screen is not None:
                await self.app.set_screen(screen)
            await self.app.open_page(url, placement)
        except CDPError as exc:
            raise ConsoleRefusal(f"the browser could not open it: {clip(exc, 200)}", 502) from None

    async def refresh_pages(self, screen: Rect | None = None) -> None:
        """Re-read the Pages (the console regained focus); `screen`: its work area, as the browser reports it."""
        if screen is not None:
            await self.app.set_screen(screen)
        await self.app.pages.refresh()

    async def grant_access(self, client: str, pages: list[str], bound: str, minutes: float | None) -> None:
        """The user granted a paired MCP client these Pages, until revoked, for `minutes`, or until a Page
        changes."""
        grants = self.app.grants
        grant = grants.grant(client, pages, bound, minutes)
        if grant.expires_at is not None:
            delay = max(grant.expires_at - grants.clock(), 0)
            self._grant_timers.append(asyncio.get_running_loop().call_later(delay + 0.05, grants.expire))

    async def revoke_access(self, client: str) -> None:
        self.app.grants.revoke(client)

    async def deny_access(self, client: str) -> None:
        self.app.grants.deny(client)

    def close(self) -> None:
        for timer in self._grant_timers:
            timer.cancel()
