"""`--help` at every level of `computer-use` as a person reads it: what the program and each command is, every
option with its help, its default and its choices, and no name from the source (a module, a class, a function).
`--version` is the installed distribution's."""

from __future__ import annotations

import argparse
import re
from importlib.metadata import version

import pytest

import runtime.cli
from runtime.cli import DISTRIBUTION, build_parser
from suites.cli.conftest import run_command

pytestmark = pytest.mark.req("cli:help")

INTERNAL = re.compile(
    r"\b(?:runtime|host|backends|lab|suites|fixtures_sites)\.[a-z_]+"  # a module path
    r"|\b[A-Z][a-z]+[A-Z][a-z]+\w*"  # a class (HostApp, PrivateChromium)
    r"|\b[a-z_]+\(\)"  # a call, func()
    r"|\.py\b"
    r"|\b__\w+__\b"
)
"""What a name from the source looks like in prose."""


def commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every parser under `parser`, by its prog, `parser` first."""
    found = {parser.prog: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found.update(commands(sub))
    return found


def problems_of(parser: argparse.ArgumentParser) -> list[str]:
    """What a person would miss in the help of `parser` and every command under it."""
    found = []
    for prog, command in commands(parser).items():
        text = command.format_help()
        if not (command.description or "").strip():
            found.append(f"{prog}: no description")
        for name in INTERNAL.findall(text):
            found.append(f"{prog}: names {name!r} from the source")
        for action in command._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction | argparse._VersionAction):
                continue
            option = "/".join(action.option_strings)
            if not action.help or action.help == argparse.SUPPRESS:
                found.append(f"{prog} {option}: no help")
                continue
            shown = command._get_formatter()._expand_help(action) if action.help else ""
            if action.default not in (None, False) and "default" not in shown:
                found.append(f"{prog} {option}: its default {action.default!r} is not shown")
            if action.choices and "{" + ",".join(map(str, action.choices)) + "}" not in text:
                found.append(f"{prog} {option}: its choices are not shown")
    return found


def test_every_command_describes_itself_and_every_option_with_help_default_and_choices() -> None:
    parser = build_parser()
    assert set(commands(parser)) >= {f"computer-use {name}" for name in ("serve", "app", "eval", "connect")}
    assert problems_of(parser) == []


def test_help_and_version_work_from_the_command_line(tmp_path) -> None:
    top = run_command(tmp_path, "--help")
    assert top.status == 0, top.stderr
    for name in ("serve", "app", "eval", "connect"):
        assert re.search(rf"^\s+{name}\s+\S", top.stdout, re.M), f"{name} is not listed with a line of help"
    assert "exit status" in top.stdout
    for name in ("serve", "app", "eval", "connect"):
        ran = run_command(tmp_path, name, "--help")
        assert ran.status == 0, ran.stderr
        assert ran.stdout.startswith(f"usage: computer-use {name}"), ran.stdout[:200]
    shown = run_command(tmp_path, "--version")
    assert shown.stdout.strip() == f"computer-use {version(DISTRIBUTION)}"


@pytest.mark.negative_control
def test_the_help_check_catches_an_option_without_help_and_a_description_from_the_source() -> None:
    parser = build_parser()
    serve = commands(parser)["computer-use serve"]
    serve.description = runtime.cli.__doc__  # what the top of `serve --help` was: the module's docstring
    serve.add_argument("--undocumented", default="x")
    serve.add_argument("--hidden-choices", choices=("a", "b"), metavar="X", help="one of two")
    found = problems_of(parser)
    assert "computer-use serve --undocumented: no help" in found
    assert any("names 'runtime.transports' from the source" in problem for problem in found), found
    assert any("--hidden-choices: its choices are not shown" in problem for problem in found), found
