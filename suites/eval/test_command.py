"""`computer-use eval` is a subcommand like `computer-use app`: an entry point of the `computer_use.commands` group
(the runtime finds it there and never imports it), and the set's files ship with the `host` package."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

import pytest

from host.evals.runner import QUESTIONS, SCRIPT, register, run

pytestmark = pytest.mark.req("eval:runner")

ROOT = Path(__file__).resolve().parents[2]


def test_eval_is_an_entry_point_of_computer_use_and_its_files_are_package_data() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["entry-points"]["computer_use.commands"]["eval"] == "host.evals.runner:register"
    shipped = project["tool"]["setuptools"]["package-data"]["host"]
    for path in (QUESTIONS, SCRIPT):
        relative = path.relative_to(ROOT / "host")
        assert any(relative.match(pattern) for pattern in shipped), f"{relative} is not package data"


def test_register_adds_eval_with_its_options() -> None:
    parser = argparse.ArgumentParser(prog="computer-use")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(
        ["eval", "--provider", "script", "--only", "3", "--only", "9", "--backend", "open_claude_chrome"]
    )
    assert args.func is run
    assert (args.provider, args.only, args.backend, args.questions) == (
        "script",
        ["3", "9"],
        "open_claude_chrome",
        QUESTIONS,
    )
