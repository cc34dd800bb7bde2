"""Fuzzing the MCP boundary of `computer_use` (issue 11, part 5).

Hypothesis generates calls — valid ones on a real authorized fixture Page, mutated ones, garbage ones (unicode,
lone surrogates, huge strings, wrong types, duplicate keys where the transport carries them, nested assertions)
— and `_meta` with fresh, missing, forged, replayed, cross-connection, stale, mistyped and huge tokens. Every call,
in-process through `mcp.Client(runtime.server)` and for a share over stdio (`computer-use serve`), must keep:

1. no exception reaches the client, and an answer comes within a bound;
2. the answer is exactly one envelope that parses as `ComputerUseResult`, with a reason code (if any) among the
   eleven, and `isError` exactly when the status is `failed`;
3. a call refused before the backend (`invalid_arguments`, `invalid_capability`) sent 0 CDP commands from the
   runtime's tap label.

The count and the seed are printed and attached to the report; `FUZZ_SEED` replays a run. A negative control runs
the same invariants against services broken on purpose for one input class, and must catch each.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import allure
import pytest
from hypothesis import HealthCheck, Phase, assume, given, seed, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.types import CallToolRequest, CallToolRequestParams, CallToolResult, TextContent

from fixtures_sites.server import FixtureServer
from lab.tap import CDPTap
from runtime.assembly import Runtime
from runtime.capability.contexts import ProviderRequest
from runtime.capability.token import new_secret, open_token, sign
from runtime.capability.verifier import CALL_KEY, TOKEN_KEY
from runtime.models import ComputerUseResult, from_text
from runtime.reasons import ReasonCode
from runtime.service import ComputerUseService, Outcome, Settings
from runtime.transports.mcp.server import TOOL, build_server
from suites.fuzz.conftest import DEFAULT_EXAMPLES, FuzzBudget
from suites.fuzz.strategies import Duplicated, Live, Meta, calls
from suites.harness import Agent, Desk, client_in_task, ref_of
from suites.proofs import runtime_commands

pytestmark = [pytest.mark.fuzz, pytest.mark.req("fuzz:boundary")]

ROOT = Path(__file__).resolve().parents[2]
SERVE = [sys.executable, "-m", "runtime.cli", "serve"]
CODES = frozenset(code.value for code in ReasonCode)
REFUSED_BEFORE_BACKEND = frozenset({ReasonCode.invalid_arguments, ReasonCode.invalid_capability})
_limits = Settings()
BOUND = _limits.lease_timeout + _limits.act_timeout + _limits.observe_timeout + 10
"""Seconds an answer may take at most: the longest path (lease, act, re-observe) bounded by the runtime, plus slack."""
STDIO_SHARE = 5
"""The stdio run gets 1/STDIO_SHARE of the examples (each is a cheap refusal, but crosses a process)."""


# -- the invariants --------------------------------------------------------------------------------------------


def check_envelope(raw: CallToolResult) -> ComputerUseResult:
    """Invariant 2 on one in-process answer: one envelope, a known reason code, isError iff failed."""
    texts = [c for c in raw.content if isinstance(c, TextContent)]
    assert isinstance(raw.structured_content, dict), f"no structured envelope: {raw.content!r:.500}"
    assert len(texts) == 1, f"{len(texts)} text contents instead of one envelope"
    assert from_text(texts[0].text) == raw.structured_content, "the text and structured envelopes differ"
    try:
        raw.model_dump_json(by_alias=True)  # what stdio and HTTP write: UTF-8 JSON
    except ValueError as exc:
        raise AssertionError(f"the answer cannot be written to a wire: {exc!s:.200}") from None
    return check_structured(raw.structured_content, raw.is_error)


def check_structured(data: dict[str, Any], is_error: bool) -> ComputerUseResult:
    code = data.get("reason_code")
    assert code is None or code in CODES, f"reason code {code!r} is not one of the eleven"
    result = ComputerUseResult.model_validate(data)
    assert (result.status == "ok") == (result.reason_code is None), f"status {result.status} with code {code}"
    assert is_error == (result.status == "failed"), f"isError={is_error} on a {result.status} answer"
    return result


def check_refusal_cost(result: ComputerUseResult, tap: CDPTap, since: int) -> None:
    """Invariant 3: a refusal before the backend sent nothing to Chromium from the runtime's label (save the late
    release of an earlier call's handle)."""
    if result.reason_code in REFUSED_BEFORE_BACKEND:
        sent = runtime_commands(tap, since)
        assert not sent, f"{result.reason_code} after {len(sent)} CDP commands: {Counter(sent).most_common(5)}"


class ClientRefuses(Exception):
    """The SDK's client cannot even encode this request (e.g. a lone surrogate in a `_meta` key): nothing would
    reach the server, so the example is not one for the in-process run; the raw stdio run sends such bytes."""


def sendable(arguments: dict[str, Any], meta: dict[str, Any] | None) -> bool:
    params = CallToolRequestParams(name=TOOL, arguments=arguments, _meta=meta)  # type: ignore[call-arg]
    try:
        CallToolRequest(params=params).model_dump(by_alias=True, mode="json", exclude_none=True)
    except (ValueError, UnicodeError):
        return False
    return True


# -- running Hypothesis next to the event loop -----------------------------------------------------------------


async def run_fuzz(
    strategy: st.SearchStrategy[Any],
    one: Callable[[Any], Awaitable[None]],
    budget: FuzzBudget,
    examples: int,
    *,
    shrink: bool = True,
) -> None:
    """Run a Hypothesis property whose examples are coroutines on this loop.

    Hypothesis draws in a worker thread (its build context is thread-local) and hands each example to the running
    loop, which keeps serving the runtime, the tap and the fixture server meanwhile. An example without an answer
    within `BOUND` fails the property (invariant 1).
    """
    loop = asyncio.get_running_loop()
    phases = tuple(Phase) if shrink else (Phase.explicit, Phase.generate)

    @seed(budget.seed)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=phases,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def prop(case: Any) -> None:
        future = asyncio.run_coroutine_threadsafe(one(case), loop)
        try:
            future.result(BOUND)
        except ClientRefuses:
            assume(False)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise AssertionError(f"no answer within {BOUND:g}s") from None

    await asyncio.to_thread(prop)


def report_run(name: str, budget: FuzzBudget, examples: int, tally: Counter[str]) -> None:
    """Print and attach the count and the seed (and what the calls came back with)."""
    figures = {"examples": examples, "seed": budget.seed, "calls": sum(tally.values()), "outcomes": dict(tally)}
    allure.attach(json.dumps(figures, indent=2), f"{name}: count and seed", "application/json")
    allure.dynamic.parameter("fuzz examples", examples)
    allure.dynamic.parameter("fuzz seed", budget.seed)
    print(f"{name}: {examples} examples, seed {budget.seed} (replay: FUZZ_SEED={budget.seed}); outcomes {dict(tally)}")


def refs_in(observation: str | None) -> list[str]:
    """Every ref of the latest observation, read the way the other suites read one (`ref_of`)."""
    refs = []
    for line in (observation or "").splitlines():
        with contextlib.suppress(AssertionError):
            refs.append(ref_of(line))
    return refs


# -- the in-process harness ------------------------------------------------------------------------------------


@dataclass
class Boundary:
    """One MCP connection to a server, the lab's host minting for it, and the live values calls refer to."""

    client: Client
    connection: str  # the nonce tokens of this connection are minted for
    desk: Desk
    tap: CDPTap
    server: FixtureServer
    request: ProviderRequest | None = None
    session: str = "cs_none"
    frame: str = "f_none"
    refs: list[str] = field(default_factory=list)
    last_meta: dict[str, Any] | None = None
    tally: Counter[str] = field(default_factory=Counter)

    async def start(self) -> None:
        """Observe the authorized Page once: binds this connection to its nonce and gives live values to use."""
        self.request = await self.desk.request()
        seen = await self.call({"command": "observe", "page": self.desk.handle("A")}, await self.meta(Meta("fresh")))
        assert seen.status == "ok", seen
        self.tally.clear()

    def resolve(self, value: Any) -> Any:
        if isinstance(value, Live):
            return {
                "handle": self.desk.handle("A"),
                "session": self.session,
                "frame": self.frame,
                "ref": self.refs[len(self.refs) // 2] if self.refs else "no-ref-observed",
                "url": self.server.url("/dom_form/"),
            }[value.name]
        if isinstance(value, Duplicated):  # a decoder keeps the last value of a repeated key
            return {key: self.resolve(item) for key, item in value.pairs}
        if isinstance(value, dict):
            return {key: self.resolve(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        return value

    async def meta(self, spec: Meta) -> dict[str, Any] | None:
        assert self.request is not None
        tool_call, token = self.request.mint(self.connection)
        kind = spec.token
        if kind == "replayed" and self.last_meta is not None:
            return self.last_meta
        if kind == "stale_request":
            old, self.request = self.request, await self.desk.request()
            tool_call, token = old.mint(self.connection)
        if kind == "missing_meta":
            return None
        meta: dict[str, Any] = {TOKEN_KEY: token, CALL_KEY: tool_call}
        if kind == "no_token":
            del meta[TOKEN_KEY]
        elif kind == "garbage":
            meta[TOKEN_KEY] = spec.garbage
        elif kind == "huge":
            meta[TOKEN_KEY] = token + ("x" * 1_000_000)
        elif kind == "tampered":
            meta[TOKEN_KEY] = ("f" if token[0] != "f" else "e") + token[1:]
        elif kind == "other_secret":
            meta[TOKEN_KEY] = sign(open_token(token, self.desk.runtime.host.store.secret), new_secret())
        elif kind == "other_connection":
            meta[CALL_KEY], meta[TOKEN_KEY] = self.request.mint("conn-elsewhere")
        elif kind == "other_tool_call":
            meta[CALL_KEY] = tool_call + "-other"
        meta.update(dict(spec.extra))
        if kind == "fresh" and not spec.extra:
            self.last_meta = meta
        return meta

    async def call(self, arguments: dict[str, Any], meta: dict[str, Any] | None) -> ComputerUseResult:
        if not sendable(arguments, meta):
            self.tally["unsendable by the SDK client"] += 1
            raise ClientRefuses
        since = len(self.tap.records)
        try:
            raw = await asyncio.wait_for(self.client.call_tool(TOOL, arguments, meta=meta), BOUND)
        except TimeoutError:
            raise AssertionError(f"no answer within {BOUND:g}s") from None
        except Exception as exc:
            raise AssertionError(f"the client got an exception: {type(exc).__name__}: {exc!s:.300}") from exc
        result = check_envelope(raw)
        check_refusal_cost(result, self.tap, since)
        self.tally[result.reason_code.value if result.reason_code else f"ok:{arguments.get('command')}"] += 1
        if result.status == "ok" and result.frame_id and result.computer_session_id:
            self.session, self.frame = result.computer_session_id, result.frame_id
            self.refs = refs_in(result.observation)
        return result

    async def example(self, case: tuple[Any, Meta]) -> None:
        arguments, spec = case
        meta = await self.meta(spec)  # before the tap is read: a new provider request reads the Pages
        self.tap.clear()
        await self.call(self.resolve(arguments), meta)


@pytest.fixture
async def boundary(
    one_page_desk: Callable[[str], Awaitable[Desk]], agent: Agent, tap: CDPTap, fixture_server: FixtureServer
) -> Boundary:
    desk = await one_page_desk("/dom_form/")
    harness = Boundary(agent.client.client, agent.client.connection, desk, tap, fixture_server)
    await harness.start()
    return harness


async def test_every_fuzzed_in_process_call_gets_one_known_envelope_in_time_and_refusals_cost_no_cdp(
    boundary: Boundary, fuzz_budget: FuzzBudget
) -> None:
    await run_fuzz(calls(), boundary.example, fuzz_budget, fuzz_budget.examples)
    report_run("in-process", fuzz_budget, fuzz_budget.examples, boundary.tally)
    assert boundary.tally["ok:observe"] + boundary.tally["ok:act"] + boundary.tally["ok:verify"] > 0, (
        f"no generated call reached the backend: {dict(boundary.tally)}"
    )


# -- stdio, with raw JSON-RPC lines ----------------------------------------------------------------------------

STDIO_LIVE = {"handle": "pg_1", "session": "cs_1", "frame": "f_1", "ref": "e1", "url": "http://127.0.0.1:9/"}


def encode(value: Any, escape: bool = False) -> str:
    """JSON text as a raw client could write it: repeated keys kept, NaN/Infinity as the lenient encoders write them,
    lone surrogates either as `\\ud800` escapes (`escape`) or as raw bytes (`RawStdio.send` writes them as invalid
    UTF-8)."""
    if isinstance(value, Live):
        return json.dumps(STDIO_LIVE[value.name])
    pairs = value.pairs if isinstance(value, Duplicated) else value.items() if isinstance(value, dict) else None
    if pairs is not None:
        return "{" + ",".join(f"{encode(key, escape)}:{encode(item, escape)}" for key, item in pairs) + "}"
    if isinstance(value, list):
        return "[" + ",".join(encode(item, escape) for item in value) + "]"
    return json.dumps(value, ensure_ascii=escape)


def stdio_meta(spec: Meta, escape: bool) -> str:
    """A bare server has no host, so no token it could accept: every kind is some missing or forged token."""
    if spec.token == "missing_meta":
        return ""
    token: Any = {"garbage": spec.garbage, "huge": "x" * 1_000_000, "no_token": None}.get(spec.token, "e30.AAAA")
    meta = {CALL_KEY: "call-1"} if token is None else {TOKEN_KEY: token, CALL_KEY: "call-1"}
    return f',"_meta":{encode({**meta, **dict(spec.extra)}, escape)}'


@dataclass
class RawStdio:
    """A JSON-RPC client over a `computer-use serve` child's stdio, one line per message, nothing normalized."""

    process: asyncio.subprocess.Process
    next_id: int = 1

    async def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode("utf-8", "surrogatepass") + b"\n")
        await self.process.stdin.drain()

    async def request(self, method: str, params: str) -> dict[str, Any]:
        """Send one request; return its one answer. Any other answer or unreadable line before it is a failure."""
        assert self.process.stdout is not None
        ident, self.next_id = self.next_id, self.next_id + 1
        await self.send(f'{{"jsonrpc":"2.0","id":{ident},"method":"{method}","params":{params}}}')
        while True:
            line = await asyncio.wait_for(self.process.stdout.readline(), BOUND)
            assert line, f"the server closed stdout (exit status {self.process.returncode})"
            message = json.loads(line)
            if "id" not in message:
                continue  # a notification (a log line): not an answer
            assert message["id"] == ident, f"an answer to {message['id']!r} while waiting for {ident}: {line!r:.300}"
            return message


@pytest.fixture
async def stdio(tap: CDPTap, tmp_path: Path) -> AsyncIterator[RawStdio]:
    log = (tmp_path / "serve.stderr").open("wb")
    process = await asyncio.create_subprocess_exec(
        *SERVE,
        "--cdp-endpoint",
        await tap.endpoint("runtime"),
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)},
        cwd=str(ROOT),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=log,
        limit=2**26,
    )
    raw = RawStdio(process)
    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}
        answer = await raw.request("initialize", json.dumps(hello))
        assert "result" in answer, answer
        await raw.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        yield raw
    finally:
        if process.returncode is None:
            process.terminate()
        await asyncio.wait_for(process.wait(), 10)
        log.close()


async def test_every_fuzzed_stdio_call_gets_one_known_envelope_in_time_and_no_cdp_without_a_host(
    stdio: RawStdio, tap: CDPTap, fuzz_budget: FuzzBudget
) -> None:
    tally: Counter[str] = Counter()

    async def one(case: tuple[tuple[Any, Meta], bool]) -> None:
        (arguments, spec), escape = case
        tap.clear()
        params = f'{{"name":"{TOOL}","arguments":{encode(arguments, escape)}{stdio_meta(spec, escape)}}}'
        answer = await stdio.request("tools/call", params)
        assert "result" in answer, f"a JSON-RPC error instead of an envelope: {answer!r:.500}"
        body = answer["result"]
        assert isinstance(body.get("structuredContent"), dict), f"no structured envelope: {body!r:.500}"
        texts = [c for c in body.get("content", []) if c.get("type") == "text"]
        assert len(texts) == 1, f"{len(texts)} text contents instead of one envelope"
        result = check_structured(body["structuredContent"], bool(body.get("isError")))
        assert result.reason_code in REFUSED_BEFORE_BACKEND, f"{result.reason_code} from a server without a host"
        check_refusal_cost(result, tap, 0)
        tally[result.reason_code.value] += 1

    examples = max(1, fuzz_budget.examples // STDIO_SHARE)
    await run_fuzz(st.tuples(calls(), st.booleans()), one, fuzz_budget, examples, shrink=False)
    report_run("stdio", fuzz_budget, examples, tally)


# -- negative controls: the same invariants against services broken for one input class -------------------------


def _nested(args: Any) -> bool:
    return args.command == "verify" and args.assertion is not None and args.assertion.type in ("all_of", "any_of")


NEGATIVE_BUDGET = FuzzBudget(DEFAULT_EXAMPLES, seed=3459203051)
"""The negative controls run one fixed seed, whose examples reach every broken input class: a fresh seed may draw
no nested verify in 150 examples (seen once in CI), and a control that passes by luck proves nothing."""


class LeakingService(ComputerUseService):
    """Lets an exception escape for verify calls with a nested assertion."""

    async def handle(self, args: Any, meta: Any, connection: object) -> Outcome:
        if _nested(args):
            raise RuntimeError("assertion tree walker exploded")
        return await super().handle(args, meta, connection)


class OffListService(ComputerUseService):
    """Answers verify calls with a nested assertion with a reason code that is not one of the eleven."""

    async def handle(self, args: Any, meta: Any, connection: object) -> Outcome:
        if _nested(args):
            return Outcome(ComputerUseResult.model_construct(status="failed", reason_code="assertion_too_deep"))
        return await super().handle(args, meta, connection)


class EagerService(ComputerUseService):
    """Asks the browser something before it checks the token (a call without a valid token still costs CDP)."""

    async def handle(self, args: Any, meta: Any, connection: object) -> Outcome:
        await self.cdp.send("Target.getTargets")
        return await super().handle(args, meta, connection)


@pytest.mark.negative_control
@pytest.mark.filterwarnings("ignore:Generating overly large repr")  # the caught example may hold a huge string
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # OffListService's off-list code, on purpose
@pytest.mark.parametrize(
    ("broken", "caught"),
    [
        (LeakingService, "no structured envelope"),
        (OffListService, "not one of the eleven"),
        (EagerService, "after 1 CDP commands"),
    ],
)
async def test_the_fuzz_invariants_catch_a_service_broken_for_one_input_class(
    one_page_desk: Callable[[str], Awaitable[Desk]],
    runtime: Runtime,
    tap: CDPTap,
    fixture_server: FixtureServer,
    broken: type[ComputerUseService],
    caught: str,
) -> None:
    desk = await one_page_desk("/dom_form/")
    service = broken(
        await tap.endpoint("runtime"), runtime.cdp, runtime.registry, runtime.host.store, _backends(runtime)
    )
    try:
        async with client_in_task(build_server(service)) as client:
            harness = Boundary(client, "conn-broken", desk, tap, fixture_server)
            await harness.start()
            with pytest.raises(AssertionError, match=caught):
                await run_fuzz(calls(), harness.example, NEGATIVE_BUDGET, DEFAULT_EXAMPLES, shrink=False)
    finally:
        await service.close()


def _backends(runtime: Runtime) -> Any:
    return runtime.service.sessions.backends
