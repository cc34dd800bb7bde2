"""`computer-use eval` end to end, with the script provider: the real app (its runtime, its MCP server over HTTP,
host-minted tokens, the agent loop), a private headless Chromium and the fixture server as a child process, all
started by the runner itself (`python -m host.evals`, the same code as `computer-use eval`).

What this proves: each question can be answered through the runtime in two or more tool calls, the answer is in
what the tools returned (the script's `$match` reads it from the observations), and the runner grades, counts and
reports. What it does not prove: that a model finds the answers — the script's author chose the calls and the
patterns. `computer-use eval --provider anthropic` measures that.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from host.evals import runner
from host.evals.runner import COLUMNS, SCRIPT, Options, evaluate
from suites.host.wire import API_KEY, Call, Failure, Hang, Reply, StandIn

pytestmark = pytest.mark.starts_early

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 300.0
"""Seconds a whole run may take (ten questions: about 20–65 s here, depending on the backend)."""

WRONG = "167"


def run_eval(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-m", "host.evals", "--provider", "script", *args],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env=env,
        cwd=ROOT,
        check=False,
    )


def table(stdout: str) -> tuple[list[str], dict[str, list[str]], str]:
    """The printed header's columns, the rows by question id (cells split at runs of 2+ spaces) and the total."""
    lines = stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("question"))
    total = next(line for line in lines if line.startswith("total: "))
    rows = {}
    for line in lines[header + 1 :]:
        if line.startswith("total: "):
            break
        cells = re.split(r"\s{2,}", line.strip(), maxsplit=len(COLUMNS) - 1)
        rows[cells[0]] = cells
    return re.split(r"\s{2,}", lines[header].strip()), rows, total


def wrong_script(tmp_path: Path) -> Path:
    """The packaged script, except that question 1 ends with a hard-coded wrong answer."""
    script = json.loads(SCRIPT.read_text(encoding="utf-8"))
    script["1"][-1] = {"say": f"ANSWER: {WRONG}"}
    path = tmp_path / "wrong.json"
    path.write_text(json.dumps(script), encoding="utf-8")
    return path


@pytest.mark.req("eval:runner", "eval:set")
def test_the_script_provider_answers_all_ten_questions_through_the_app_each_in_two_or_more_tool_calls(
    backend: str,
) -> None:
    done = run_eval("--backend", backend)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr[-3000:]}"
    columns, rows, total = table(done.stdout)
    assert columns == list(COLUMNS)
    assert sorted(rows, key=int) == [str(n) for n in range(1, 11)]
    for qid, (_, result, calls, tokens, seconds, answer) in rows.items():
        assert result == "pass", f"question {qid}: {answer}"
        assert int(calls) >= 2, f"question {qid} took {calls} tool call(s)"
        count, estimated = tokens.split(" ")
        assert int(count) > 0
        assert estimated == "est."  # the script provider reports no usage: the runtime's estimate, marked
        assert seconds.endswith("s")
    assert total.startswith("total: 10/10 passed, ")
    assert f"backend {backend}" in done.stdout


def assert_wrong_answer_fails(status: int, rows: dict[str, list[str]]) -> None:
    """Question 1 answered WRONG fails and makes the run fail; question 2, answered right, still passes."""
    assert status == 1
    assert rows["1"][1] == "FAIL"
    assert f'"{WRONG}" expected "168"' in rows["1"][5]
    assert rows["2"][1] == "pass"


@pytest.mark.negative_control
@pytest.mark.req("eval:runner", "cli:progress")
def test_a_wrong_answer_is_graded_fail_and_the_run_exits_non_zero(tmp_path: Path) -> None:
    done = run_eval("--script", str(wrong_script(tmp_path)), "--only", "1", "--only", "2")
    _, rows, total = table(done.stdout)
    assert list(rows) == ["1", "2"]  # --only: the chosen questions, and no other
    assert_wrong_answer_fails(done.returncode, rows)
    assert total.startswith("total: 1/2 passed, ")
    progress = [line for line in done.stderr.splitlines() if line.startswith("computer-use eval: [")]
    assert progress == [f"computer-use eval: [{n}/2] question {n}: asking" for n in (1, 2)], done.stderr[-2000:]


@pytest.mark.negative_control
@pytest.mark.req("eval:runner")
async def test_a_grader_that_passes_everything_is_caught_by_the_wrong_answer_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "grade", lambda given, expected: True)
    out = io.StringIO()
    status, outcomes = await evaluate(
        Options(provider="script", script=wrong_script(tmp_path), only=("1", "2")), out=out
    )
    assert [o.given for o in outcomes] == [WRONG, "Tundra"]  # the run itself went through
    _, rows, _ = table(out.getvalue())
    with pytest.raises(AssertionError):
        assert_wrong_answer_fails(status, rows)


@pytest.mark.req("eval:runner")
async def test_with_a_provider_api_the_answer_graded_is_the_model_s_own_and_the_usage_is_the_reported_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    async with StandIn("anthropic") as api:
        api.answer(
            Reply(calls=(Call("t1", "computer_use", ('{"command": ', '"list_pages"}')),)),
            Reply(calls=(Call("t2", "computer_use", ('{"command": "observe", "page": "other_window"}',)),)),
            Reply(text=("The field shows Germany.\n", "ANSWER: Germany")),
        )
        out = io.StringIO()
        status, outcomes = await evaluate(Options(provider="anthropic", base_url=api.base_url, only=("4",)), out=out)
    assert status == 0, out.getvalue()
    (outcome,) = outcomes
    assert (outcome.passed, outcome.given, outcome.tool_calls) == (True, "Germany", 2)
    assert (outcome.tokens, outcome.estimated) == (3 * (1 + 9), False)  # what the stand-in reported, per call
    _, rows, total = table(out.getvalue())
    assert rows["4"][3] == "30"
    assert total.startswith("total: 1/1 passed, 2 tool calls, 30 tokens, ")
    # What the model was sent: the question with the answer format, then the Page as the runtime observed it.
    first, last = api.requests[0], api.requests[-1]
    assert "ANSWER: <answer>" in json.dumps(first["messages"][0])
    observed = json.dumps(last["messages"][-1])  # the tool results of the observe call
    assert "Country or region" in observed
    assert "Germany" in observed


@pytest.mark.req("eval:runner")
async def test_a_provider_error_or_a_turn_past_the_time_limit_fails_its_question_and_the_run_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    async with StandIn("anthropic") as api:
        api.answer(Failure(500, "api_error", "internal"), Hang(), Reply(text=("ANSWER: 14",)))
        out = io.StringIO()
        options = Options(provider="anthropic", base_url=api.base_url, only=("4", "5", "6"), timeout=3.0)
        status, outcomes = await evaluate(options, out=out)
    assert status == 1
    assert [o.passed for o in outcomes] == [False, False, True]
    assert outcomes[0].problem.startswith("provider error: server: anthropic answered HTTP 500")
    assert outcomes[1].problem == "no answer within 3s"
    assert outcomes[1].seconds < 30  # the time limit, not the stand-in's own bound, ended it
    assert len(api.requests) == 3  # stopped after the error: no retry
    _, rows, total = table(out.getvalue())
    assert [row[1] for row in rows.values()] == ["FAIL", "FAIL", "pass"]
    assert total.startswith("total: 1/3 passed, ")
