"""The task set as data: one task per fixture scenario (`<scenario>.json` beside this module), one representation run
by two runners — the parity runner (`suites/parity/tasks.py`: each backend through the runtime, reduced to outcome
signatures) and the installed runner (`suites/installed/taskset.py`: the script provider's script, typed into the
installed app's console). Both hand the steps to the script provider (host/providers/script.py), which resolves
their references against the results so far, so a step means the same thing in both.

A task file holds:
- `scenario`: its name (the file's);
- `open`: the Page the task works on, a path on the fixture server whose query carries `task=<scenario>`, so that
  `{"$page": "task=<scenario>"}` finds it and nothing else;
- `message`: what the user types (the installed runner's turn);
- `reqs`: what its steps exercise beyond `parity:<scenario>` and what every parity task compares;
- `writes`: the ledger paths it writes, in order, once each;
- `act_timeout` (optional): the parity runner's runtime setting, in seconds (the app has no such setting);
- `seat` (optional): the canvas seat whose viewport point `{"$lab": "seat.x"}` / `{"$lab": "seat.y"}` name, measured
  by each runner in its own window (the parity desk's column, a window of the console's size);
- `facts` (optional): what both runners read off the fixture server's requests after the task: `{"form": path,
  "fields": [...]}` (those fields of the last form sent to `path`), `{"seat_hit": path}` (the last point sent to
  `path` is within 2 px of the seat's centre);
- `steps`, in order, each a model reply — `say`, `calls` — or a `find`: `{"find": ["role", "name substring"],
  "label": ..., "reqs": [...]}`, the agent looking a ref up in what it has seen, with no tool call (the parity
  runner records whether it resolves; the installed runner has nothing to type for it).

A call holds `call`, the `computer_use` arguments, with the script provider's references (`$page`, `$session`,
`$frame`, `$ref`) and `{"$lab": name}` for what only the lab knows at run time (`url:<path>`: the fixture server's
URL; `seat.x`, `seat.y`; `popup`: the handle of the popup the call before opened); `expect`, its outcome (`status`
and `reason`, the reason code; `{"status": "ok"}` when absent); `label` and `reqs`, when the call is a step of the
parity signature (a call without a label is made and not compared); `lab`, the lab's moves around it (below); and
`installed`, what the installed runner sends (`call`) and expects (`expect`) instead, and `why`; and optionally a
`note` on why its outcome is what it is.

The lab's moves (`lab`), each runner making those it can:
- `request: path` — the call causes a request to `path`: the parity runner waits for it (registered before the
  call) before its next step; the installed runner reads the ledger after the turn;
- `settle: condition` — then the parity runner waits in the page until the JS `condition` holds (an app's turn
  goes on without the lab);
- `hold: path` — the answer to `path` is held while the call runs: the parity runner records whether it was still
  held when the call answered (`held_when_answered`), the installed runner whether the call's card showed
  `running` while it was (`running_while_held`); each then lets it go;
- `popup: true` — the call opens a popup: the parity runner records it as the registry sees it (its opener, and
  whether `list_pages` has it) and names its handle `popup`; the installed runner checks the console's Pages list;
- `only_the_task_page: fact` — this `list_pages` listed the task's Page and no other (the parity runner's fact).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from fixtures_sites.scenarios import canvas
from fixtures_sites.server import SeenRequest

FOLDER = Path(__file__).resolve().parent
SCENARIOS = (
    "dom_form", "catalogue", "login", "captcha", "sensitive", "injection", "popup", "frames", "canvas", "stall",
)  # fmt: skip
"""The fixture scenarios, in the order both runners take them."""
TOOL = "computer_use"
LAB = "$lab"
MOVES = ("request", "settle", "hold", "popup", "only_the_task_page")
SEAT_TOLERANCE = 2
"""Pixels a pick may land from the seat's centre and still hit it."""

Runner = Literal["parity", "installed"]


class TaskFileError(ValueError):
    """A task file that does not say what this module reads (raised while loading, with where and what)."""


def _keys(raw: Any, allowed: set[str], required: set[str], where: str) -> dict[str, Any]:
    if not isinstance(raw, dict) or not required <= set(raw) or not set(raw) <= allowed:
        raise TaskFileError(f"{where}: an object with {sorted(required)} (and optionally "
                            f"{sorted(allowed - required)}), got {json.dumps(raw)[:160]}")  # fmt: skip
    return raw


@dataclass(frozen=True)
class Call:
    """One `computer_use` call of a model reply, with what each runner expects of it and does around it."""

    arguments: Mapping[str, Any]
    expect: Mapping[str, str]
    label: str | None
    reqs: tuple[str, ...]
    lab: Mapping[str, Any]
    installed: Mapping[str, Any]

    @classmethod
    def parse(cls, raw: Any, where: str) -> Call:
        raw = _keys(raw, {"call", "expect", "label", "reqs", "lab", "installed", "note"}, {"call"}, where)
        lab = _keys(raw.get("lab", {}), set(MOVES), set(), f"{where}: lab")
        installed = _keys(raw.get("installed", {}), {"call", "expect", "why"}, set(), f"{where}: installed")
        for expect in (raw.get("expect", {}), installed.get("expect", {})):
            _keys(expect, {"status", "reason"}, set(), f"{where}: expect")
        if "reqs" in raw and "label" not in raw:
            raise TaskFileError(f"{where}: reqs name what a labelled step exercises; this call has no label")
        return cls(raw["call"], raw.get("expect", {}), raw.get("label"), tuple(raw.get("reqs", ())), lab, installed)

    def arguments_for(self, runner: Runner) -> Mapping[str, Any]:
        return self.installed.get("call", self.arguments) if runner == "installed" else self.arguments

    def expected(self, runner: Runner) -> dict[str, str]:
        """{"status": ..., "reason": code} (no reason: none) as the runner meets it."""
        expect = self.installed.get("expect", self.expect) if runner == "installed" else self.expect
        return {"status": "ok", **expect}


@dataclass(frozen=True)
class Reply:
    """One model reply: what it says and the calls it makes."""

    say: str
    calls: tuple[Call, ...]

    def script(self, runner: Runner, values: Mapping[str, Any]) -> dict[str, Any]:
        """The step as the script provider reads it, `$lab` values filled in."""
        calls = [{"name": TOOL, "arguments": fill(c.arguments_for(runner), values)} for c in self.calls]
        return {"say": self.say, "calls": calls}

    def lab_names(self, runner: Runner) -> set[str]:
        return {name for c in self.calls for name in _lab_names(c.arguments_for(runner))}


@dataclass(frozen=True)
class Find:
    """The agent looks a ref up in what it has seen: `$ref`'s [role, name substring], no tool call."""

    ref: tuple[str, str]
    label: str
    reqs: tuple[str, ...]


@dataclass(frozen=True)
class TaskFile:
    scenario: str
    open: str | None
    message: str
    reqs: tuple[str, ...]
    writes: tuple[str, ...]
    steps: tuple[Reply | Find, ...]
    act_timeout: float | None
    seat: int | None
    facts: Mapping[str, Mapping[str, Any]]

    @classmethod
    def load(cls, name: str, folder: Path = FOLDER) -> TaskFile:
        where = f"{name}.json"
        raw = _keys(
            json.loads((folder / where).read_text(encoding="utf-8")),
            {"scenario", "open", "message", "reqs", "writes", "steps", "act_timeout", "seat", "facts"},
            {"scenario", "open", "message", "writes", "steps"},
            where,
        )
        if raw["scenario"] != name:
            raise TaskFileError(f"{where} names scenario {raw['scenario']!r}")
        if raw["open"] is not None and f"task={name}" not in raw["open"]:
            raise TaskFileError(f"{where}: open's query carries task={name}, so that $page finds its Page alone")
        steps: list[Reply | Find] = []
        for number, step in enumerate(raw["steps"], 1):
            at = f"{where}, step {number}"
            if isinstance(step, dict) and "find" in step:
                step = _keys(step, {"find", "label", "reqs"}, {"find", "label", "reqs"}, at)
                role, name = step["find"]
                steps.append(Find((role, name), step["label"], tuple(step["reqs"])))
            else:
                step = _keys(step, {"say", "calls"}, {"say", "calls"}, at)
                calls = tuple(Call.parse(c, f"{at}, call {i}") for i, c in enumerate(step["calls"], 1))
                steps.append(Reply(step["say"], calls))
        facts = raw.get("facts", {})
        for fact, reader in facts.items():
            _keys(reader, {"form", "fields", "seat_hit"}, set(), f"{where}: facts.{fact}")
        return cls(raw["scenario"], raw["open"], raw["message"], tuple(raw.get("reqs", ())), tuple(raw["writes"]),
                   tuple(steps), raw.get("act_timeout"), raw.get("seat"), facts)  # fmt: skip

    def replies(self) -> list[Reply]:
        return [step for step in self.steps if isinstance(step, Reply)]

    def calls(self) -> Iterator[Call]:
        return (call for reply in self.replies() for call in reply.calls)

    def moves(self, move: str) -> list[Any]:
        """The arguments of every `move` the task's calls ask the lab for."""
        return [call.lab[move] for call in self.calls() if move in call.lab]

    def read_facts(self, requests: Callable[[str], Sequence[SeenRequest]]) -> dict[str, Any]:
        """The facts the task declares, read off the fixture server's requests (`FixtureServer.requests`)."""
        facts: dict[str, Any] = {}
        for name, reader in self.facts.items():
            if "form" in reader:
                sent = requests(reader["form"])
                form = sent[-1].form() if sent else {}
                facts[name] = {key: form.get(key) for key in reader["fields"]}
            else:
                picks = requests(reader["seat_hit"])
                point = json.loads(picks[-1].body) if picks else {}
                x, y = canvas.target_center(self.seat or 0)
                facts[name] = bool(point) and max(abs(point["x"] - x), abs(point["y"] - y)) <= SEAT_TOLERANCE
        return facts


CANVAS_RECT = "JSON.stringify(document.querySelector('canvas').getBoundingClientRect())"
"""What a runner evaluates in its own window to measure where the seat plan is."""


def seat_point(rect: Mapping[str, float], seat: int) -> dict[str, float]:
    """`seat.x` / `seat.y`: the seat's centre in viewport px, from the canvas's rect (`CANVAS_RECT`) as measured."""
    x, y = canvas.target_center(seat)
    return {"seat.x": rect["x"] + x, "seat.y": rect["y"] + y}


def fill(value: Any, values: Mapping[str, Any]) -> Any:
    """`value` with every `{"$lab": name}` replaced by `values[name]`."""
    if isinstance(value, dict):
        if set(value) == {LAB}:
            return values[value[LAB]]
        return {key: fill(item, values) for key, item in value.items()}
    if isinstance(value, list):
        return [fill(item, values) for item in value]
    return value


def _lab_names(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        if set(value) == {LAB}:
            yield value[LAB]
        else:
            for item in value.values():
                yield from _lab_names(item)
    elif isinstance(value, list):
        for item in value:
            yield from _lab_names(item)
