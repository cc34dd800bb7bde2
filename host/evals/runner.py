"""`computer-use eval`: ask a model the evaluation set's questions through the app's own agent loop, and grade.

The runner starts the host app in-process (`HostApp.start`: its runtime, its MCP server on streamable HTTP, the
agent loop; headless, with a private Chromium) and the lab's fixture server (`python -m fixtures_sites`, a child
process, unless `--fixtures-url` names a running one). For each question it opens the question's Pages, sends the
question with exactly those Pages ticked (the turn's authorization), and waits for the turn to end, bounded. The
model reaches the runtime over MCP with tokens the host mints, as in the console; nothing is shortcut. Each
question is its own chat (`Conversation.reset`): no question sees another's transcript.

The model must end its reply with a line `ANSWER: <answer>`; the text after the last such line is graded exactly
against the set's answer, after collapsing whitespace and ignoring case (nothing else is forgiven). A question
whose turn needs the user or hits a provider error is stopped and fails.

Printed: one line per question (result, tool calls, tokens, time, the answer given), then a total line. Tokens
are the provider's reported usage for the turn (input plus output, summed over its model calls) when it reports
it (the Anthropic provider does; the OpenAI provider only when the endpoint sends usage unasked); otherwise, marked
`est.`, the runtime's estimate (`runtime.observation.estimate`, 2.5 UTF-8 bytes per token) of everything the model
read in the turn's requests — the question and, per request, every tool result and reply before it (the script
provider reports nothing, so its runs always show the estimate; it leaves out the system prompt and the
tool schema, which a provider's figure includes). While a question runs, stderr shows which one (a line each, or
one updating line on a terminal). Exit status 0 only if every question passed; 1 if any failed; otherwise the
start-up failure's own (`runtime.startup`: 2 a bad question file, 6 a provider or script problem, ...), with its
one line on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import re
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from host.app import AppConfig, HostApp, StartError
from host.cli import add_provider_arguments, chosen_provider, provider_failure
from host.providers import make_provider
from host.providers.base import AssistantTurn, Entry, Provider, ProviderError, ToolResults, UserText
from host.providers.script import ScriptError, ScriptProvider, parse_steps
from host.settings import BACKENDS
from host.turns import ConsoleRefusal
from runtime.cdp import CDPError
from runtime.cli import CommandParser, report
from runtime.observation import estimate
from runtime.startup import ProviderUnavailable, StartupFailure, UsageError

HERE = Path(__file__).resolve().parent
QUESTIONS = HERE / "questions.xml"
SCRIPT = HERE / "script.json"

QUESTION_TIMEOUT = 180.0
"""Seconds one question's turn may take before it is stopped and fails."""
FIXTURES_TIMEOUT = 30.0
"""Seconds the fixture server may take to announce its URL."""

EVAL_INSTRUCTIONS = (
    "Answer from what the authorized Pages show. Only read: do not change anything on any Page. "
    "When you know the answer, end your reply with one last line `ANSWER: <answer>` in plain text (no formatting), "
    "with nothing after it."
)
ANSWER = re.compile(r"^[ \t]*ANSWER:[ \t]*(.*?)[ \t]*$", re.MULTILINE)
ANNOUNCE = re.compile(r"fixture server on (http://\S+?)/? and")
COLUMNS = ("question", "result", "tool calls", "tokens", "time", "answer")
PROG = "computer-use eval"
EVAL_DESCRIPTION = """\
Ask a model the evaluation set's questions (ten read-only questions over the lab's fixture sites) through the
host app's own agent loop, headless, and grade each answer exactly.

Prints a row per question (result, tool calls, tokens, time, the answer given) and a total; stderr shows which
question runs. Without a key (or with --provider script) a packaged script answers, which proves the path, not a
model. Exit status 0 only if every question passed, 1 if one failed."""


class EvalFileError(ValueError):
    """A question or script file that cannot be used; the message says where and what."""


class Progress:
    """Which question runs, on `stream`: one line each, or on a terminal one line rewritten in place (and
    cleared at the end, so the table's rows stay together)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.live = stream.isatty()

    def show(self, text: str) -> None:
        if self.live:
            self.stream.write(f"\r\x1b[K{text}")
        else:
            self.stream.write(f"computer-use eval: {text}\n")
        self.stream.flush()

    def clear(self) -> None:
        if self.live:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    answer: str
    pages: tuple[str, ...]
    """Paths on the fixture server, opened and authorized for this question's turn, in this order."""


@dataclass
class QuestionOutcome:
    question: Question
    passed: bool
    tool_calls: int = 0
    tokens: int = 0
    estimated: bool = True
    """`tokens` is the runtime's estimate (the provider reported no usage)."""
    seconds: float = 0.0
    given: str | None = None
    """The text after the model's last `ANSWER:` line; None when there was none."""
    problem: str = ""
    """Why the turn did not end normally (needs_user, a provider error, the timeout), if it did not."""
    reply: str = field(default="", repr=False)


def load_questions(path: Path) -> list[Question]:
    """The `<evaluation><qa_pair id=…><pages><page>/path</page>…</pages><question>…</question><answer>…</answer>
    </qa_pair>…</evaluation>` file, checked: ids unique, every pair with a question, an answer and a Page."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise EvalFileError(f"cannot read the questions {path}: {exc}") from None
    if root.tag != "evaluation":
        raise EvalFileError(f"{path}: the root element is <evaluation>, not <{root.tag}>")
    questions: list[Question] = []
    for number, pair in enumerate(root.findall("qa_pair"), 1):
        qid = (pair.get("id") or str(number)).strip()
        text = " ".join((pair.findtext("question") or "").split())
        answer = " ".join((pair.findtext("answer") or "").split())
        pages = tuple((page.text or "").strip() for page in pair.findall("pages/page"))
        if not text or not answer:
            raise EvalFileError(f"{path}: qa_pair {qid} needs a <question> and an <answer>")
        if not pages or not all(page.startswith("/") for page in pages):
            raise EvalFileError(f"{path}: qa_pair {qid} needs <pages> with <page>/path</page> on the fixture server")
        if any(q.id == qid for q in questions):
            raise EvalFileError(f"{path}: two qa_pairs have the id {qid}")
        questions.append(Question(qid, text, answer, pages))
    if not questions:
        raise EvalFileError(f"{path}: no <qa_pair>")
    return questions


def load_script(path: Path) -> dict[str, list[Any]]:
    """The script provider's task file for the set: `{"<question id>": [steps…], …}` (steps as in
    host/providers/script.py), each question's steps validated now."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EvalFileError(f"cannot read the script {path}: {exc}") from None
    if not isinstance(data, dict):
        raise EvalFileError(f"{path}: an evaluation script is a JSON object of question id → steps")
    for qid, steps in data.items():
        try:
            parse_steps(steps)
        except ScriptError as exc:
            raise EvalFileError(f"{path}: question {qid}: {exc}") from None
    return data


def normalize(text: str) -> str:
    """What grading forgives: runs of whitespace, and case. Nothing else."""
    return " ".join(text.split()).casefold()


def given_answer(reply: str) -> str | None:
    """The text after the last `ANSWER:` line of the model's final reply; None if it wrote none."""
    found = ANSWER.findall(reply)
    return found[-1] if found else None


def grade(given: str | None, expected: str) -> bool:
    return given is not None and normalize(given) == normalize(expected)


def prompt(question: Question) -> str:
    return f"{question.question}\n\n{EVAL_INSTRUCTIONS}"


def read_tokens(transcript: Sequence[Entry]) -> int:
    """Estimated tokens the model read over the turn: each request carries the transcript so far, so every entry
    is counted once per request that came after it (there is one request per `AssistantTurn`)."""
    total = 0
    sent = 0
    for entry in transcript:
        if isinstance(entry, UserText):
            size = estimate(entry.text)
        elif isinstance(entry, ToolResults):
            size = sum(estimate(result.text) for result in entry.results)
        else:
            total += sent  # one request: everything before this reply
            size = estimate(entry.text) + sum(estimate(json.dumps(c.arguments)) for c in entry.tool_calls)
        sent += size
    return total


# -- the run ------------------------------------------------------------------------------------------------


async def start_fixtures() -> tuple[asyncio.subprocess.Process, str]:
    """`python -m fixtures_sites` as a child process; its base URL once it announces it (bounded)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "fixtures_sites", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), FIXTURES_TIMEOUT)
        found = ANNOUNCE.search(line.decode("utf-8", "replace"))
        if not found:
            raise StartError(f"the fixture server did not start (it said {line[:200]!r})")
    except BaseException:
        await stop_process(process)
        raise
    return process, found[1]


async def stop_process(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()


async def ask(
    app: HostApp, base_url: str, question: Question, provider: Provider | None, timeout: float = QUESTION_TIMEOUT
) -> QuestionOutcome:
    """One question in a chat of its own, on its own Pages; the Pages are closed afterwards."""
    began = time.monotonic()
    await app.conversation.reset(provider)
    pages = []
    problem = ""
    try:
        for path in question.pages:
            try:
                page = await app.open_page(base_url + path)
            except (CDPError, ConsoleRefusal, TimeoutError) as exc:
                problem = f"could not open the Page {path}: {exc}"
                break
            pages.append(page)
            if not await app.until_titled(page):
                problem = f"the Page {path} did not load"
        if not problem:
            problem = await _turn(app, prompt(question), [page.registry_page_id for page in pages], timeout)
    finally:
        for page in pages:
            with contextlib.suppress(CDPError, TimeoutError):
                await app.runtime.cdp.send("Target.closeTarget", {"targetId": page.cdp_target_id})
    transcript = app.conversation.transcript
    replies = [entry for entry in transcript if isinstance(entry, AssistantTurn)]
    reply = replies[-1].text if replies and not replies[-1].tool_calls else ""
    given = given_answer(reply)
    usage = app.conversation.usage
    return QuestionOutcome(
        question=question,
        passed=not problem and grade(given, question.answer),
        tool_calls=sum(len(entry.tool_calls) for entry in replies),
        tokens=read_tokens(transcript) if usage is None else usage.input_tokens + usage.output_tokens,
        estimated=usage is None,
        seconds=time.monotonic() - began,
        given=given,
        problem=problem,
        reply=reply,
    )


async def _turn(app: HostApp, text: str, pages: list[str], timeout: float) -> str:
    """Send the question and follow the event log until the turn is idle again; what went wrong, or ""."""
    start = app.events.next_id
    app.conversation.send(text, pages)
    problem = ""
    try:
        async with asyncio.timeout(timeout):
            async for _, raw in app.events.follow(start):
                event = json.loads(raw)
                if event.get("type") == "card" and event.get("kind") == "provider_error":
                    problem = f"provider error: {event.get('reason', '')}"
                elif event.get("type") != "turn":
                    continue
                state = event.get("state")
                if state == "needs_user":
                    problem = "the turn needed the user (a read-only question never should)"
                    app.conversation.decide("stop")
                elif state == "error":
                    app.conversation.decide("stop")
                elif state == "idle":
                    return problem
    except TimeoutError:
        await app.conversation.cancel()
        return f"no answer within {timeout:g}s"
    return "the app's event log closed during the turn"


@dataclass
class Options:
    provider: str | None = None
    model: str | None = None
    script: Path | None = None
    base_url: str | None = None
    questions: Path = QUESTIONS
    backend: str | None = None
    only: tuple[str, ...] = ()
    fixtures_url: str | None = None
    timeout: float = QUESTION_TIMEOUT
    headless: bool = True


async def evaluate(
    options: Options, out: TextIO = sys.stdout, progress: TextIO | None = None
) -> tuple[int, list[QuestionOutcome]]:
    """Run the set as `options` say; print the table to `out` and which question runs to `progress` (stderr).
    Returns the exit status and the outcomes; a failure to start is its one line on stderr and its status."""
    try:
        return await _evaluate(options, out, Progress(progress or sys.stderr))
    except StartupFailure as failure:
        return report(PROG, failure), []


async def _evaluate(options: Options, out: TextIO, progress: Progress) -> tuple[int, list[QuestionOutcome]]:
    try:
        questions = load_questions(options.questions)
        if options.only:
            unknown = [qid for qid in options.only if qid not in {q.id for q in questions}]
            if unknown:
                raise EvalFileError(f"no question {', '.join(unknown)} in {options.questions}")
            questions = [q for q in questions if q.id in options.only]
    except EvalFileError as exc:
        raise UsageError(str(exc), "see `computer-use eval --help` and docs/eval.md") from None
    name = chosen_provider(options.provider, options.script) or _default_provider()
    try:
        script = load_script(options.script or SCRIPT) if name == "script" else None
    except EvalFileError as exc:
        raise ProviderUnavailable(str(exc), "fix the file (its format: docs/eval.md) or leave out --script") from None
    if script is None:  # a missing key or SDK: say so before starting anything, not once per question
        try:
            await make_provider(name, model=options.model, base_url=options.base_url).close()
        except ProviderError as exc:
            raise provider_failure(exc, name) from None
    fixtures = None
    base_url = (options.fixtures_url or "").rstrip("/")
    with tempfile.TemporaryDirectory(prefix="computer-use-eval-") as config_dir:
        config = AppConfig(
            mcp_port=0,
            provider=name,
            model=options.model,
            base_url=options.base_url,
            backend=options.backend,
            config_dir=Path(config_dir),
            open_console=False,
            headless=options.headless,
        )
        app = None
        try:
            if not base_url:
                fixtures, base_url = await start_fixtures()
            app = await HostApp.start(config)
            provider_note = name + (f" ({options.model})" if options.model else "")
            print(
                f"computer-use eval: {len(questions)} question(s) from {options.questions.name}, provider "
                f"{provider_note}, backend {app.runtime.service.settings.backend}",
                file=out,
                flush=True,
            )
            print(_row(*COLUMNS), file=out, flush=True)
            outcomes = []
            for number, question in enumerate(questions, 1):
                progress.show(f"[{number}/{len(questions)}] question {question.id}: asking")
                provider = None
                if script is not None:
                    provider = ScriptProvider(
                        parse_steps(script.get(question.id, [])), source=f"question {question.id}"
                    )
                outcome = await ask(app, base_url, question, provider, options.timeout)
                outcomes.append(outcome)
                progress.clear()
                print(_line(outcome), file=out, flush=True)
        except (OSError, CDPError, TimeoutError) as exc:  # the browser, a port, a child process
            logging.getLogger(__name__).debug("the run failed", exc_info=True)
            raise StartupFailure(
                f"could not run ({type(exc).__name__}: {exc})", "start it again; if it fails the same way, report it"
            ) from None
        finally:
            progress.clear()
            if app is not None:
                await app.close()
            if fixtures is not None:
                await stop_process(fixtures)
    passed = sum(o.passed for o in outcomes)
    print(
        f"total: {passed}/{len(outcomes)} passed, {sum(o.tool_calls for o in outcomes)} tool calls, "
        f"{sum(o.tokens for o in outcomes)} tokens{_estimated(outcomes)}, "
        f"{sum(o.seconds for o in outcomes):.1f}s",
        file=out,
        flush=True,
    )
    return (0 if passed == len(outcomes) else 1), outcomes


def _estimated(outcomes: Sequence[QuestionOutcome]) -> str:
    if outcomes and all(o.estimated for o in outcomes):
        return " (est.)"
    return " (some est.)" if any(o.estimated for o in outcomes) else ""


def _default_provider() -> str:
    from host.app import choose_provider

    return choose_provider()


WIDTHS = (8, 6, 10, 10, 7)


def _row(*cells: str) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, WIDTHS, strict=False)) + "  " + cells[-1]


def _line(outcome: QuestionOutcome) -> str:
    answer = "(no ANSWER line)" if outcome.given is None else json.dumps(outcome.given[:80], ensure_ascii=False)
    if not outcome.passed:
        answer += f" expected {json.dumps(outcome.question.answer, ensure_ascii=False)}"
    if outcome.problem:
        answer += f" ({outcome.problem})"
    return _row(
        outcome.question.id,
        "pass" if outcome.passed else "FAIL",
        str(outcome.tool_calls),
        f"{outcome.tokens}{' est.' if outcome.estimated else ''}",
        f"{outcome.seconds:.1f}s",
        answer,
    )


# -- the command --------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_provider_arguments(
        parser, "the script provider's evaluation script (implies --provider script; default: the packaged one)"
    )
    parser.add_argument(
        "--questions",
        type=Path,
        default=QUESTIONS,
        metavar="FILE",
        help="the question file (default: the packaged questions.xml)",
    )
    parser.add_argument("--backend", choices=BACKENDS, help=f"the runtime's backend (default: {BACKENDS[0]})")
    parser.add_argument("--only", action="append", metavar="ID", help="ask only the question with this id (repeatable)")
    parser.add_argument(
        "--fixtures-url",
        metavar="URL",
        help="a running fixture server (http://localhost:PORT) (default: start one)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=QUESTION_TIMEOUT,
        metavar="SECONDS",
        help="how long one question may take (then it fails)",
    )


def register(subparsers: Any) -> None:
    """Add `eval` to `computer-use`'s subcommands (the `computer_use.commands` entry point)."""
    parser = subparsers.add_parser(
        "eval",
        help="ask a model the ten evaluation questions through the app and grade the answers",
        description=EVAL_DESCRIPTION,
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    options = Options(
        provider=args.provider,
        model=args.model,
        script=args.script,
        base_url=args.base_url,
        questions=args.questions,
        backend=args.backend,
        only=tuple(args.only or ()),
        fixtures_url=args.fixtures_url,
        timeout=args.timeout,
    )
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    status, _ = asyncio.run(evaluate(options))
    return status


def main(argv: Sequence[str] | None = None) -> int:
    parser = CommandParser(prog=PROG, description=EVAL_DESCRIPTION)
    add_arguments(parser)
    return run(parser.parse_args(argv))
