"""Every way `computer-use serve`, `app` and `eval` can fail to start, run as a real subprocess: exactly one line on
stderr that says what went wrong and what to do, the documented exit status of its class, no traceback, nothing
left in its temporary folder and no process of its left running (`conftest.run_command` audits both).

The fakes are real executables and real sockets: a port bound by the test, a closed port for an unreachable
browser, shell scripts that pose as a Chromium that dies or one that hangs. No case needs a model or a browser
that works; each run takes about a second.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from runtime.startup import EXIT_STATUSES
from suites.cli.conftest import ROOT, Ran, run_command

pytestmark = pytest.mark.req("cli:startup-failures")

BACKENDS_LISTED = ("playwright_mcp", "chrome_devtools_mcp", "open_claude_chrome")
LINE = re.compile(r"^computer-use(?: \w+)?: .+; .+$")
"""`computer-use <command>: <what went wrong>; <what to do>`."""


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    status: int
    says: tuple[str, ...]
    """Words the line must hold: what went wrong, in the person's words, and the way out."""
    env: dict[str, str] = field(default_factory=dict)
    module: tuple[str, ...] = ("runtime.cli",)


@dataclass
class Props:
    """What the cases are made of: a port nothing listens on, a port the test holds, the fake Chromiums, files."""

    closed_port: int
    busy_port: int
    fake: dict[str, Path]
    folder: Path
    dead_display: str

    def file(self, name: str, text: str) -> str:
        path = self.folder / name
        path.write_text(text, encoding="utf-8")
        return str(path)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def dead_display() -> str:
    """An X display nothing serves: no socket in /tmp/.X11-unix and nothing on its TCP port."""
    for number in range(77, 177):
        if not Path(f"/tmp/.X11-unix/X{number}").exists() and closed(6000 + number):
            return f":{number}"
    raise AssertionError("every display from :77 to :176 is served here")


def closed(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture
def props(tmp_path: Path, fake_chromium: dict[str, Path]) -> Iterator[Props]:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen(1)
    try:
        yield Props(closed_port(), held.getsockname()[1], fake_chromium, tmp_path, dead_display())
    finally:
        held.close()


APP = ("app", "--port", "0")
"""`app` on any free MCP port: 18100 may be taken on a machine that runs the installed app."""
MISSING = {"CHROMIUM": "/nonexistent/chromium"}

CASES: dict[str, Callable[[Props], Case]] = {
    # serve
    "serve, a browser that does not answer at --cdp-endpoint": lambda p: Case(
        ("serve", "--cdp-endpoint", f"http://127.0.0.1:{p.closed_port}"),
        4,
        (f"no browser answers at http://127.0.0.1:{p.closed_port}", "--remote-debugging-port"),
    ),
    "serve, a --cdp-endpoint that is no URL": lambda p: Case(
        ("serve", "--cdp-endpoint", "localhost:9222"), 2, ("'localhost:9222' is not a browser's debugging endpoint",)
    ),
    "serve, no Chromium": lambda p: Case(
        ("serve", "--launch"), 3, ("CHROMIUM=/nonexistent/chromium is not an executable", "install Chromium"), MISSING
    ),
    "serve, a Chromium that dies at start": lambda p: Case(
        ("serve", "--launch"), 3, ("did not start", "FATAL", "set CHROMIUM"), {"CHROMIUM": str(p.fake["dies"])}
    ),
    "serve, a Chromium that hangs without answering": lambda p: Case(
        ("serve", "--launch"), 3, ("did not start", "set CHROMIUM"), {"CHROMIUM": str(p.fake["hangs"])}
    ),
    # The hanging Chromium makes the order visible: a port checked after the launch would answer 3.
    "serve, a busy port": lambda p: Case(
        ("serve", "--transport", "http", "--port", str(p.busy_port), "--launch"),
        5,
        (f"port {p.busy_port} on 127.0.0.1 is in use", "--port"),
        {"CHROMIUM": str(p.fake["hangs"])},
    ),
    "serve, an unknown backend": lambda p: Case(
        ("serve", "--launch", "--backend", "foo"), 2, ("invalid choice: 'foo'", *BACKENDS_LISTED)
    ),
    "serve, neither --launch nor --cdp-endpoint": lambda p: Case(
        ("serve",), 2, ("--cdp-endpoint", "--launch", "computer-use serve --help")
    ),
    # app
    "app, a browser that does not answer at --cdp-endpoint": lambda p: Case(
        (*APP, "--cdp-endpoint", f"http://127.0.0.1:{p.closed_port}"), 4, ("no browser answers",)
    ),
    "app, a --cdp-endpoint that is no URL": lambda p: Case(
        (*APP, "--cdp-endpoint", "http://127.0.0.1:port"), 2, ("is not a browser's debugging endpoint",)
    ),
    "app, no Chromium": lambda p: Case(APP, 3, ("CHROMIUM=/nonexistent/chromium", "install Chromium"), MISSING),
    "app, a Chromium that dies at start": lambda p: Case(
        APP, 3, ("did not start", "FATAL"), {"CHROMIUM": str(p.fake["dies"])}
    ),
    # The real Chromium, headed on a display no X server answers: it exits at once, its helpers after it.
    "app, a real Chromium with no X server at DISPLAY": lambda p: Case(
        APP, 3, ("did not start", "--headless"), {"DISPLAY": p.dead_display}
    ),
    "app, a busy MCP port": lambda p: Case(
        ("app", "--port", str(p.busy_port)), 5, (f"port {p.busy_port}", "--port"), {"CHROMIUM": str(p.fake["hangs"])}
    ),
    "app, a busy console port": lambda p: Case(
        (*APP, "--console-port", str(p.busy_port)),
        5,
        (f"port {p.busy_port}", "--console-port"),
        {"CHROMIUM": str(p.fake["hangs"])},
    ),
    "app, an unknown backend": lambda p: Case(
        (*APP, "--backend", "foo"), 2, ("invalid choice: 'foo'", *BACKENDS_LISTED)
    ),
    "app, a provider without its key": lambda p: Case(
        (*APP, "--provider", "anthropic"), 6, ("needs an API key", "ANTHROPIC_API_KEY is not set", "set")
    ),
    "app, a --script that is not there": lambda p: Case(
        (*APP, "--script", "/nonexistent/task.json"), 6, ("cannot read the script /nonexistent/task.json",)
    ),
    "app, a --script that is not JSON": lambda p: Case(
        (*APP, "--script", p.file("task.json", "[{not json")), 6, ("is not JSON", "fix the file")
    ),
    "app, a --script with another provider": lambda p: Case(
        (*APP, "--provider", "openai", "--script", p.file("task.json", "[]")), 2, ("--script runs the script provider",)
    ),
    "app, --demo with another provider": lambda p: Case((*APP, "--demo", "--provider", "openai"), 2, ("--demo",)),
    # eval
    "eval, an unknown backend": lambda p: Case(("eval", "--backend", "foo"), 2, ("invalid choice: 'foo'",)),
    "eval, a provider without its key": lambda p: Case(
        ("eval", "--provider", "openai"), 6, ("OPENAI_API_KEY is not set",)
    ),
    "eval, a script that is not JSON": lambda p: Case(
        ("eval", "--script", p.file("script.json", "{")), 6, ("cannot read the script",)
    ),
    "eval, a question file that is not there": lambda p: Case(
        ("eval", "--questions", "/nonexistent/questions.xml"), 2, ("cannot read the questions",)
    ),
    # It starts the fixture server (a child process) before the browser: that child must go too.
    "eval, no Chromium": lambda p: Case(("eval", "--provider", "script"), 3, ("install Chromium",), MISSING),
}


def assert_fails_cleanly(ran: Ran, case: Case) -> None:
    """One line on stderr, `computer-use …: what; what to do`, the case's status, no traceback, nothing left."""
    assert "Traceback" not in ran.stderr, f"a traceback:\n{ran.stderr[-3000:]}"
    lines = ran.stderr.splitlines()
    assert len(lines) == 1, f"{len(lines)} lines on stderr, not one:\n{ran.stderr[-3000:]}"
    assert LINE.match(lines[0]), f"not `computer-use <command>: <what>; <what to do>`: {lines[0]}"
    for words in case.says:
        assert words in lines[0], f"{words!r} is not in: {lines[0]}"
    assert ran.status == case.status, f"exit status {ran.status}, not {case.status}: {lines[0]}"
    assert ran.stdout == "", f"it printed on stdout: {ran.stdout[-500:]}"
    assert ran.temp_left == [], f"left in its temporary folder: {ran.temp_left}"
    assert ran.survivors == [], f"still running after it exited: {ran.survivors}"


@pytest.mark.parametrize("name", CASES)
def test_a_failure_to_start_is_one_line_with_its_own_status_and_leaves_nothing(name: str, props: Props) -> None:
    case = CASES[name](props)
    assert_fails_cleanly(run_command(props.folder, *case.args, env=case.env, module=case.module), case)


def assert_ran_and_left_nothing(ran: Ran) -> None:
    assert (ran.status, ran.stderr) == (0, ""), ran.stderr[-2000:]
    assert ran.temp_left == [], f"left in its temporary folder: {ran.temp_left}"
    assert ran.survivors == [], f"still running after it exited: {ran.survivors}"


def test_a_launched_chromium_that_ran_leaves_nothing_either(tmp_path: Path) -> None:
    """The way out of a run that worked: `serve --launch` over stdio ends with its input; Chromium ran (its
    folder in $TMPDIR included) and nothing of it stays."""
    assert_ran_and_left_nothing(run_command(tmp_path, "serve", "--launch"))


def test_every_exit_status_is_documented_where_the_commands_are() -> None:
    for doc in ("docs/runtime.md", "README.md"):
        text = (ROOT / doc).read_text(encoding="utf-8")
        for status, meaning in EXIT_STATUSES.items():
            assert f"| {status} | {meaning} |" in text, f"{doc} does not list exit status {status}: {meaning}"


# -- negative controls: the same check on deliberately broken variants (suites/cli/variant.py) -------------------


def variant(name: str) -> tuple[str, ...]:
    return ("suites.cli.variant", name)


@pytest.mark.negative_control
def test_the_check_catches_a_command_that_lets_the_traceback_through(props: Props) -> None:
    case = CASES["serve, no Chromium"](props)
    ran = run_command(props.folder, *case.args, env=case.env, module=variant("traceback"))
    with pytest.raises(AssertionError, match="a traceback"):
        assert_fails_cleanly(ran, case)


@pytest.mark.negative_control
def test_the_check_catches_a_failed_launch_that_leaves_a_temp_folder(props: Props) -> None:
    case = CASES["serve, a Chromium that dies at start"](props)
    ran = run_command(props.folder, *case.args, env=case.env, module=variant("leaves_temp_folder"))
    with pytest.raises(AssertionError, match="left in its temporary folder"):
        assert_fails_cleanly(ran, case)


@pytest.mark.negative_control
def test_the_check_catches_a_failed_launch_that_leaves_chromium_running(props: Props) -> None:
    case = CASES["serve, a Chromium that hangs without answering"](props)
    ran = run_command(props.folder, *case.args, env=case.env, module=variant("leaves_chromium"))
    with pytest.raises(AssertionError, match="still running after it exited"):
        assert_fails_cleanly(ran, case)


@pytest.mark.negative_control
def test_the_check_catches_a_run_that_leaves_chromium_s_folder_in_tmpdir(tmp_path: Path) -> None:
    ran = run_command(tmp_path, "serve", "--launch", module=variant("leaves_chromium_folder"))
    with pytest.raises(AssertionError, match=r"left in its temporary folder: \['org\.chromium\.Chromium\."):
        assert_ran_and_left_nothing(ran)
