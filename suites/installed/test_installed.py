"""Phase 6: the installed app on 127.0.0.1:18100 runs the parity task set from its console, and the lab's
instruments prove it: the cards the user saw, 0 CDP calls on the chat and on unticked Pages (tap), exactly-once
writes (ledger), a backend change mid-turn that moves only new sessions, and no process left after Ctrl-C (audit).

The whole task set runs in one app per backend (`task_set`, started by the first test that needs it, kept for the
module, and under xdist recorded for the run: a worker that gets tests of this module after another worker ran the
set reads that run instead of running it again); each test below checks one promise against what that run
recorded. `make test` runs the default backend; `--backend NAME` (repeatable) or no option (every backend, as
`make lab` does) picks.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
from pathlib import Path

import pytest

from fixtures_sites.server import FixtureServer
from lab.cdp import CDPClient
from lab.tap import CDPTap
from suites.console_driver import ConsoleDriver
from suites.harness import run_folder
from suites.installed.conftest import (
    AppProcess,
    Installed,
    assert_no_process_left,
    import_origins,
    still_alive,
    tidy_windows,
)
from suites.installed.taskset import (
    CONTROL,
    LABEL,
    SCENARIOS,
    Driver,
    Task,
    TaskSetRun,
    run_task_set,
)

pytestmark = pytest.mark.starts_early


def assert_untouched(calls: dict[str, dict[str, int]]) -> None:
    """Not one CDP command of the installed app reached these Pages ({name: {method: count}})."""
    touched = {name: methods for name, methods in calls.items() if methods}
    assert not touched, f"the installed app sent CDP commands to Pages it was not given: {touched}"


def assert_written_once(writes: list[str], expected: list[str]) -> None:
    """The ledger holds exactly the expected writes: each once, nothing else (no double execution)."""
    assert writes == expected, f"the ledger holds {writes}, expected exactly {expected}"


@pytest.fixture(scope="module")
def runs() -> dict[str, TaskSetRun | BaseException]:
    return {}


@pytest.fixture
async def task_set(
    runs: dict[str, TaskSetRun | BaseException],
    backend: str,
    installed: Installed,
    tap: CDPTap,
    lab_cdp: CDPClient,
    fixture_server: FixtureServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> TaskSetRun:
    """The task set's run on `backend` (the first test that asks runs it; the others read what it recorded).

    Under xdist the run is recorded in the run's shared folder, and a worker finds it there. No lock of its own is
    needed: every test here holds the port lock (`port_lock`, autouse, taken before this fixture), so no two workers
    are in this fixture at once. The record holds the instruments' readings taken during the run (tap calls, ledger
    writes), so a reader checks what the run did, not its own idle instruments."""
    shared = run_folder(tmp_path_factory)
    record = shared / f"task-set-{backend}.pickle" if shared else None
    if backend not in runs and record is not None and record.exists():
        runs[backend] = pickle.loads(record.read_bytes())
    if backend not in runs:
        try:
            runs[backend] = await run_task_set(
                installed, tap, lab_cdp, fixture_server, backend, tmp_path_factory.mktemp(f"task-set-{backend}")
            )
        except BaseException as exc:
            runs[backend] = exc
            if record is not None:  # the others fail with its story rather than run it again
                record.write_bytes(pickle.dumps(RuntimeError(f"on another worker: {exc!r}")))
            raise
        if record is not None:
            record.write_bytes(pickle.dumps(runs[backend]))
        print(json.dumps(summary(runs[backend]), indent=1))
    done = runs[backend]
    if isinstance(done, BaseException):
        raise AssertionError(f"the task set did not run on {backend}: {done!r}") from done
    return done


def summary(run: TaskSetRun) -> dict[str, object]:
    """What the run showed, per scenario: the cards' outcomes, the writes and the pauses (printed with -s)."""
    return {
        "backend": run.backend,
        "switched_to": run.switched_to,
        "turns": {
            name: {"outcomes": record.outcomes(), "writes": record.writes, "pauses": record.pauses, **record.facts}
            for name, record in run.turns.items()
        },
        "chat_calls": run.chat_calls,
        "decoy_calls": run.decoy_calls,
        "exit_code": run.exit_code,
        "processes_seen": run.processes_seen,
        "backend_children_seen": run.backend_children_seen,
        "processes_left": run.processes_left,
    }


@pytest.mark.req("app:launch", "installed:task-set")
async def test_the_installed_console_script_imports_the_venvs_copy_of_the_app_never_the_checkout(
    installed: Installed,
) -> None:
    origins = await import_origins(installed)
    for module, path in origins.items():
        assert Path(path).is_relative_to(installed.site_packages), f"{module} comes from {path}"
    shebang = installed.computer_use.read_text(encoding="utf-8").splitlines()[0]
    assert shebang == f"#!{installed.python}", shebang
    assert installed.wheel.name.endswith("-py3-none-any.whl")


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.req("installed:task-set", "app:turns", "app:live-cards", "app:needs-user")
async def test_each_scenario_typed_into_the_installed_console_shows_the_expected_cards_and_writes_only_its_page(
    task_set: TaskSetRun, scenario: str
) -> None:
    task, record = Task.load(scenario), task_set.turns[scenario]
    assert record.outcomes() == task.expected(), f"{scenario}: {[[c.__dict__ for c in s] for s in record.steps]}"
    assert {card.backend for card in record.cards()} <= {task_set.backend, ""}
    assert any(card.backend == task_set.backend for card in record.cards())  # the cards say which backend ran
    assert record.pauses == sum(o["status"] == "needs_user" for step in task.expected() for o in step)
    assert_written_once(record.writes, task.writes)
    assert all(task.needle in referer for referer in record.referers), record.referers
    assert record.attacker_hits == 0
    assert sum(record.calls.get(record.target or "", {}).values()) > 0  # the tap saw the work on the ticked Page
    assert_untouched(record.outside())
    expected_facts = {
        "dom_form": {"submitted": {"full_name": "Ada Lovelace", "country": "jp", "gift": "yes"}},
        "stall": {"running_while_held": True},
        "popup": {
            "popup_windows": 1,
            "popup_listed": 1,
            "popup_ticked": False,
            "popup_calls": {"Browser.getWindowForTarget": 1},
        },
        "canvas": {"hit": True},
    }.get(scenario, {})
    assert {key: record.facts.get(key) for key in expected_facts} == expected_facts


@pytest.mark.req("installed:task-set", "app:turns", "isolation:chat-untouched", "isolation:b-untouched")
async def test_the_chat_page_and_a_page_never_ticked_get_no_cdp_call_from_the_installed_app(
    task_set: TaskSetRun,
) -> None:
    assert_untouched({"chat": task_set.chat_calls, "the unticked Page": task_set.decoy_calls})


@pytest.mark.req("installed:backend-switch", "app:backend-setting", "app:needs-user")
async def test_a_backend_change_while_a_turn_waits_keeps_its_session_and_puts_only_the_next_one_on_the_new_backend(
    task_set: TaskSetRun,
) -> None:
    old, new = task_set.backend, task_set.switched_to
    paused, following = task_set.turns["switch_paused"], task_set.turns["switch_next"]
    assert paused.facts == {"settings_status": 200, "saved": new}  # the console's change reached the app, saved
    # The paused turn's session: observe, the email (needs_user); after the switch, a verify on it: the old backend.
    assert paused.outcomes() == Task.load("switch_paused").expected()
    assert [card.backend for card in paused.cards()] == ["", old, "", old]  # needs_user: no backend call
    # The next turn's new session: on the new backend, every card of it; no card of it on the old one.
    assert following.outcomes() == Task.load("switch_next").expected()
    assert [card.backend for card in following.cards()] == ["", new, new]
    # No double execution: the paused turn wrote nothing, the next one wrote its one write once.
    assert_written_once(paused.writes, [])
    assert_written_once(following.writes, ["/catalogue/cart"])
    assert_untouched(following.outside())
    # No fallback: after the switch, no new session of any later turn ran on the old backend.
    assert {card.backend for card in task_set.turns[CONTROL].cards()} == {"", new}


@pytest.mark.req("app:launch")
async def test_ctrl_c_stops_the_installed_app_with_status_0_and_leaves_none_of_its_processes(
    task_set: TaskSetRun, installed: Installed
) -> None:
    assert task_set.app_command.split()[:3] == [str(installed.python), str(installed.computer_use), "app"]
    assert task_set.lines[0] == "MCP: http://127.0.0.1:18100/mcp"
    assert task_set.lines[1].startswith("Console: http://127.0.0.1:")
    assert task_set.exit_code == 0
    # The audit saw the app and a backend's process (the first backend's, or the switched one's) while it ran: the
    # check that none is left is not checking nothing.
    assert task_set.processes_seen >= 2
    assert task_set.backend_children_seen >= 1, task_set
    assert task_set.processes_left == []


@pytest.mark.negative_control
@pytest.mark.req("installed:task-set", "isolation:b-untouched", "writes:at-most-one")
async def test_the_isolation_and_once_only_checks_catch_a_turn_that_works_on_the_unticked_page_and_writes_twice(
    task_set: TaskSetRun,
) -> None:
    # The broken variant: the user ticks the decoy after all, and the task adds the product to the cart twice.
    control = task_set.turns[CONTROL]
    with pytest.raises(AssertionError, match="Pages it was not given"):
        assert_untouched({"the unticked Page": dict(control.calls.get(task_set.decoy_target, {}))})
    with pytest.raises(AssertionError, match="expected exactly"):
        assert_written_once(control.writes, ["/catalogue/cart"])


@pytest.mark.negative_control
@pytest.mark.req("app:launch")
async def test_the_process_audit_catches_an_installed_app_killed_without_its_shutdown(
    installed: Installed, tap: CDPTap, lab_cdp: CDPClient, fixture_server: FixtureServer, tmp_path: Path
) -> None:
    # The broken variant: the app gets SIGKILL while a session's backend child hangs (stopped: it cannot notice its
    # stdin closing and leave by itself), so nothing stops the child — the leak an app without its shutdown makes.
    # The kill comes while the turn waits for the user on a needs_user card: a session lives as long as its turn.
    task = Task.load("sensitive")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(task.script({})), encoding="utf-8")
    async with tidy_windows(lab_cdp):
        app = await AppProcess.start(
            installed, cdp_endpoint=await tap.endpoint(LABEL), config_dir=tmp_path / "config", script=script,
            log=tmp_path / "app.log", port=0,
        )  # fmt: skip
        try:
            console = await ConsoleDriver.attach(lab_cdp, app.console_url)
            driver = Driver(app, console, lab_cdp, tap, fixture_server)
            assert task.open is not None
            handle, _ = await driver.open(fixture_server.url(task.open))
            paused = await driver.needs_user_cards()
            await driver.send(task.message, [handle])
            assert await driver.until_paused_or_done(task.marker, paused) == "paused", "the turn did not pause"
            children = [s for s in app.note_processes() if s.pid != app.pid]
            assert children, "no backend child ran: the control would prove nothing"
            for child in children:
                os.kill(child.pid, signal.SIGSTOP)
            app.process.kill()
            await app.process.wait()
            assert still_alive(children)  # nothing stopped them
            with pytest.raises(AssertionError, match="outlived it"):
                assert_no_process_left(app.seen.values())
        finally:
            await app.kill()
