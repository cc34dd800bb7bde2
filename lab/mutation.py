"""`python -m lab.mutation` (`make mutation`): mutation testing of the security-critical runtime with mutmut.

Negative controls show that a proof fails against the one breakage someone thought of; mutants are the breakages
nobody thought of. mutmut writes every small change it can make to a function (an operator, a constant, a
comparison, an argument dropped…) beside the original, and runs, for each, the tests that reached that function when
the unmutated code ran (its own coverage-based selection): a mutant is *killed* when one of them fails.

The security-critical set is a mapping kept here (`GROUPS`): each group names its modules, the functions of them
that are in the set (mutmut's mutant-name globs), and the test files that prove them, on the default backend. Each
group runs in its own work folder (`reports/mutation/work/<group>/`: a copy of `runtime/`, `suites/`, the root
conftest, `docs/` and `pyproject.toml` with the group's `[tool.mutmut]`), so a mutant of the gateway never waits for
the policy's suites, and two groups run at once. The rest of the project (`backends/`, `lab/`, `fixtures_sites/`,
`host/`) is imported from the checkout; `PYTHONPATH` points at the mutated copy so a runtime the suites start in a
subprocess runs the mutant too.

The report (`reports/mutation/`): `mutation.json` (every mutant's status), `mutation.md` (the score per module and
per group, the wall time, then every survivor with its diff). A survivor listed in docs/lab.md's table of equivalent
mutants is shown with the reason and counted apart. `make lab` attaches the last report (or, with none, the
committed `docs/mutation.md`) beside the cost summary.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
REPORT_DIR = REPO_ROOT / "reports" / "mutation"
EQUIVALENTS_DOC = REPO_ROOT / "docs" / "lab.md"
COMMITTED_REPORT = REPO_ROOT / "docs" / "mutation.md"
MUTMUT = Path(sys.executable).with_name("mutmut")
BACKEND = "playwright_mcp"
COPIED = ("runtime", "suites", "docs", "conftest.py", "pyproject.toml")
LINKED = ("backends", "fixtures_sites", "lab", "host")

GOAL_OVERALL = 0.90
GOAL_MODULE = 0.85


def _methods(module: str, cls: str, *names: str) -> tuple[str, ...]:
    return tuple(f"{module}.xǁ{cls}ǁ{name}__mutmut_*" for name in names)


def _functions(module: str, *names: str) -> tuple[str, ...]:
    return tuple(f"{module}.x_{name}__mutmut_*" for name in names)


@dataclass(frozen=True)
class Group:
    """Modules mutated together and the suites that prove them."""

    name: str
    modules: tuple[str, ...]
    """Files mutmut rewrites (globs relative to the repo root)."""
    mutants: tuple[str, ...]
    """mutmut mutant-name globs: the functions of those files that are in the security-critical set."""
    tests: tuple[str, ...]
    keyword: str = ""
    """A `-k` expression narrowing the tests (what runs only on another backend, or only outside a pytest run)."""


GROUPS: tuple[Group, ...] = (
    Group(
        "capability",
        ("runtime/capability/*",),
        ("runtime.capability.*",),
        (
            "suites/unit/test_capability.py",
            "suites/unit/test_capability_turns.py",
            "suites/unit/test_approvals.py",
            "suites/security/test_tokens_hosts.py",
            "suites/security/test_tokens_lifetime.py",
        ),
        # ten thousand calls to watch the memory stay flat: the pruning they prove has quicker checks here
        keyword="not ten_thousand_calls and not memory_checks",
    ),
    Group(
        "gateway",
        ("runtime/gateway/*",),
        (
            "runtime.gateway.allowlist.*",
            # admission: who calls, to which host, from a web page or not, with the secret
            *_methods("runtime.gateway.admission", "Admission", "admit", "check_caller", "check_host", "check_web"),
            # scope: the one Page's targets, the discovery answers and the events a client may see
            *_methods(
                "runtime.gateway.scope",
                "TargetScope",
                "visible",
                "decide",
                "target_verdict",
                "serve_json",
                "rewrite_result",
                "allow_event",
            ),
        ),
        (
            "suites/unit/test_gateway_rules.py",
            "suites/gateway",
            "suites/security/test_gateway_boundary.py",
            "suites/security/test_local_user.py",
        ),
        # The raw npm children of suites/gateway write to the test's stderr, which mutmut's in-process pytest has
        # closed; the same upstreams run behind the gateway as backends in the other suites here.
        keyword="not chrome_devtools_mcp and not test_playwright_mcp_ and not catches_playwright_mcp_behind",
    ),
    Group(
        "policy",
        ("runtime/policy.py", "runtime/sensitivity.py"),
        ("runtime.policy.*", "runtime.sensitivity.*"),
        (
            "suites/unit/test_policy_rules.py",
            "suites/unit/test_sensitivity.py",
            "suites/policy/test_policy.py",
        ),
        # pytest cannot find some of its ids again in a second in-process session (mutmut runs pytest in-process); the
        # language tables it walks are data, which mutmut does not mutate, and the rules are proven by the others
        keyword="not test_each_language_names_its_concept",
    ),
    Group(
        "reads",
        ("runtime/reading/commit.py", "runtime/reading/probe.py"),
        (
            "runtime.reading.commit.*",
            *_methods("runtime.reading.probe", "PageProbe", "structure", "ax_nodes", "query_ax", "is_visible"),
            *_functions("runtime.reading.probe", "_role", "ax_property"),
        ),
        (
            "suites/unit/test_commit_reads.py",
            "suites/unit/test_policy_rules.py",
            "suites/policy/test_policy.py",
            "suites/policy/test_probe_worlds.py",
            "suites/injection/test_evasion.py",
        ),
    ),
    Group(
        "sessions",
        ("runtime/sessions.py", "runtime/computer_session.py"),
        (
            *_methods(
                "runtime.sessions",
                "SessionManager",
                # binding: a session belongs to its (host, turn) and its Page's revision
                "acquire",
                "check_owner",
                "check_binding",
                "enter",
                "release",
                # invalidation: the Page, the turn or the grant went away
                "invalidate",
                "owner_ended",
                "spend_frames_of_others",
                "_on_registry_change",
                "_end",
            ),
            *_methods("runtime.computer_session", "ComputerSession", "invalidate", "new_frame"),
        ),
        (
            "suites/unit/test_session_binding.py",
            "suites/security/test_session_ownership.py",
            "suites/reliability/test_sessions.py",
        ),
    ),
    Group(
        "observation",
        ("runtime/observation.py", "runtime/text.py"),
        ("runtime.observation.*", "runtime.text.*"),
        (
            "suites/unit/test_observation_rendering.py",
            "suites/unit/test_relation_and_rendering.py",
            "suites/unit/test_delta.py",
            "suites/injection/test_forged_output.py",
        ),
    ),
)
"""The security-critical set: what issue 30 names, function by function, and the suites that prove it."""


def function_names(path: Path, module: str) -> set[str]:
    """The names mutmut gives a module's functions (`module.x_f`, `module.xǁClassǁmethod`), read with ast."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(f"{module}.x_{node.name}")
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(f"{module}.xǁ{node.name}ǁ{item.name}")
    return names


def unmatched(groups: Sequence[Group], root: Path = REPO_ROOT) -> list[str]:
    """The mutant-name globs that match no function of their group's modules: a function renamed or moved would
    otherwise leave the security-critical set without a word."""
    missing = []
    for group in groups:
        names = set()
        for pattern in group.modules:
            for path in sorted(root.glob(pattern if pattern.endswith(".py") else pattern + ".py")):
                module = ".".join(path.relative_to(root).with_suffix("").parts)
                names |= {f"{name}__mutmut_1" for name in function_names(path, module)}
        missing += [p for p in group.mutants if not any(fnmatchcase(name, p) for name in names)]
    return missing


KILLED = ("killed", "caught by type check")
TIMED_OUT = ("timeout",)


@dataclass
class Mutant:
    name: str
    group: str
    module: str
    status: str
    diff: str = ""
    equivalent: str = ""


def _toml_list(values: Sequence[str]) -> str:
    return json.dumps(list(values), ensure_ascii=False)


def mutmut_config(group: Group) -> str:
    """The `[tool.mutmut]` table of a group's work folder."""
    args = ["-p", "no:xdist", "-p", "no:cacheprovider", "-p", "lab.mutation_plugin", "--backend", BACKEND]
    if group.keyword:
        args += ["-k", group.keyword]
    return "\n".join(
        [
            "",
            "[tool.mutmut]",
            'source_paths = ["runtime"]',
            f"only_mutate = {_toml_list(group.modules)}",
            'also_copy = ["suites", "conftest.py", "docs"]',
            f"pytest_add_cli_args = {_toml_list(args)}",
            f"pytest_add_cli_args_test_selection = {_toml_list(group.tests)}",
            "use_git_change_detection = false",
            "",
        ]
    )


def prepare(group: Group, work: Path) -> None:
    """A fresh work folder: the files the suites need, and the group's configuration."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in COPIED:
        source = REPO_ROOT / name
        if source.is_dir():
            shutil.copytree(source, work / name, ignore=ignore)
        else:
            shutil.copy2(source, work / name)
    with (work / "pyproject.toml").open("a", encoding="utf-8") as config:
        config.write(mutmut_config(group))
    # PYTHONPATH names it before mutmut writes it: Python caches "no such folder" for a path entry it saw missing.
    (work / "mutants").mkdir()
    # The suites find the npm servers, the scenarios and the lab beside them (their own `REPO_ROOT`): link, not copy.
    for name in LINKED:
        (work / "mutants" / name).symlink_to(REPO_ROOT / name, target_is_directory=True)


def run_group(group: Group, work: Path, children: int, log: Path) -> float:
    """Run mutmut over one group in its work folder; returns the seconds it took."""
    prepare(group, work)
    env = {**os.environ, "PYTHONPATH": str(work / "mutants"), "NO_COLOR": "1"}
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        subprocess.run(
            [str(MUTMUT), "run", "--max-children", str(children), *group.mutants],
            cwd=work,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    return time.monotonic() - started


_RESULT = re.compile(r"^\s+(\S+): (.+)$")


def collect(group: Group, work: Path) -> list[Mutant]:
    """Every mutant of the group's set with its status (mutmut's own verdict), survivors with their diff."""
    listing = subprocess.run(
        [str(MUTMUT), "results", "--all", "true"], cwd=work, capture_output=True, text=True, check=False
    ).stdout
    mutants = []
    for line in listing.splitlines():
        match = _RESULT.match(line)
        if match is None or not any(fnmatchcase(match[1], pattern) for pattern in group.mutants):
            continue
        name, status = match[1], match[2].strip()
        module = name.split(".x", 1)[0].replace(".", "/") + ".py"
        mutants.append(Mutant(name, group.name, module, status))
    for mutant in mutants:
        if mutant.status not in (*KILLED, "not checked"):
            shown = subprocess.run(
                [str(MUTMUT), "show", mutant.name], cwd=work, capture_output=True, text=True, check=False
            ).stdout
            mutant.diff = "\n".join(line for line in shown.splitlines() if not line.startswith("#")).strip()
    return mutants


_EQUIVALENT_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*(.+?)\s*\|\s*$")


def equivalents(doc: Path = EQUIVALENTS_DOC) -> dict[str, str]:
    """docs/lab.md's table of equivalent mutants: `| `mutant name` | why no test can tell it apart |`."""
    if not doc.is_file():
        return {}
    text = doc.read_text(encoding="utf-8")
    section = text.split("### Equivalent mutants", 1)[-1] if "### Equivalent mutants" in text else ""
    section = section.split("\n## ", 1)[0].split("\n### ", 1)[0]
    return {m[1]: m[2] for line in section.splitlines() if (m := _EQUIVALENT_ROW.match(line))}


@dataclass(frozen=True)
class Score:
    mutants: int
    killed: int
    survived: int
    timed_out: int
    other: int
    equivalent: int

    @property
    def ratio(self) -> float:
        return self.killed / self.mutants if self.mutants else 1.0

    @property
    def ratio_without_equivalents(self) -> float:
        counted = self.mutants - self.equivalent
        return self.killed / counted if counted else 1.0


def score(mutants: Sequence[Mutant]) -> Score:
    statuses = Counter(m.status for m in mutants)
    killed = sum(statuses[s] for s in KILLED)
    timed_out = sum(statuses[s] for s in TIMED_OUT)
    survived = statuses["survived"]
    return Score(
        mutants=len(mutants),
        killed=killed,
        survived=survived,
        timed_out=timed_out,
        other=len(mutants) - killed - timed_out - survived,
        equivalent=sum(1 for m in mutants if m.equivalent and m.status not in KILLED),
    )


def _row(name: str, s: Score, goal: float) -> str:
    mark = "" if s.ratio >= goal else " (below goal)"
    return (
        f"| {name} | {s.mutants} | {s.killed} | {s.survived} | {s.timed_out} | {s.other} | {s.equivalent} "
        f"| {s.ratio:.1%}{mark} | {s.ratio_without_equivalents:.1%} |"
    )


def render(mutants: Sequence[Mutant], seconds: float, started: str, groups_again: dict[str, str] | None = None) -> str:
    """The report a reviewer reads: scores first, then every mutant not killed with its diff. `groups_again`: the groups
    run again alone since the whole run (`--group`), and when, so the wall time stays the whole run's."""
    header = (
        "| | mutants | killed | survived | timed out | other | equivalent | killed | killed of non-equivalent |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    )
    total = score(mutants)
    lines = [
        "# Mutation testing of the security-critical runtime",
        "",
        f"`make mutation` (mutmut, default backend `{BACKEND}`), started {started}, wall time "
        f"{seconds / 60:.1f} min. Goal: ≥ {GOAL_OVERALL:.0%} killed overall, ≥ {GOAL_MODULE:.0%} in each module.",
        "Timed-out mutants are counted as not killed; *other* is mutmut's `no tests`, `suspicious`, `segfault` or "
        "`not checked`.",
        *(
            ["Run again alone since: " + "; ".join(f"{name} ({when})" for name, when in groups_again.items()) + "."]
            if groups_again
            else []
        ),
        "",
        f"**Overall: {total.killed} of {total.mutants} killed ({total.ratio:.1%})**, "
        f"{total.survived} survived ({total.equivalent} of them listed equivalent in docs/lab.md), "
        f"{total.timed_out} timed out, {total.other} other.",
        "",
        "## By module",
        "",
        *header,
    ]
    for module in sorted({m.module for m in mutants}):
        lines.append(_row(f"`{module}`", score([m for m in mutants if m.module == module]), GOAL_MODULE))
    lines += ["", "## By group (one mutmut run each, its own suites)", "", *header]
    for group in GROUPS:
        of_group = [m for m in mutants if m.group == group.name]
        if of_group:
            lines.append(_row(group.name, score(of_group), GOAL_MODULE))
    lines += ["", "## Not killed", ""]
    left = [m for m in mutants if m.status not in KILLED]
    if not left:
        lines.append("Every mutant was killed.")
    for m in left:
        verdict = f"equivalent: {m.equivalent}" if m.equivalent else m.status
        lines += [f"### `{m.name}` ({verdict})", "", "```diff", m.diff or "(no diff)", "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def write(
    mutants: Sequence[Mutant],
    seconds: float,
    started: str,
    out: Path = REPORT_DIR,
    groups_again: dict[str, str] | None = None,
) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    total = score(mutants)
    (out / "mutation.json").write_text(
        json.dumps(
            {
                "started": started,
                "seconds": round(seconds, 1),
                "groups_again": groups_again or {},
                "score": total.ratio,
                "mutants": [m.__dict__ for m in mutants],
            },
            indent=1,
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    report = out / "mutation.md"
    report.write_text(render(mutants, seconds, started, groups_again), encoding="utf-8")
    return report


def print_summary() -> int:
    """The scores of the last report (this machine's run, else the committed one), without the survivors' diffs."""
    for path in (REPORT_DIR / "mutation.md", COMMITTED_REPORT):
        if path.is_file():
            scores = path.read_text(encoding="utf-8").split("\n## Not killed", 1)[0]
            print(f"mutation testing ({path.relative_to(REPO_ROOT)}):\n{scores.split(chr(10), 2)[-1].strip()}")
            return 0
    print("lab.mutation: no report yet (run make mutation)")
    return 2


HEAVIEST_FIRST = ("gateway", "capability", "reads", "sessions", "policy", "observation")
"""The order the pool starts groups in: the long ones (live suites, many mutants) first."""


def run_all(groups: Sequence[Group], parallel: int, children: int) -> None:
    (REPORT_DIR / "logs").mkdir(parents=True, exist_ok=True)
    groups = sorted(groups, key=lambda g: HEAVIEST_FIRST.index(g.name))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        futures = {
            pool.submit(run_group, g, REPORT_DIR / "work" / g.name, children, REPORT_DIR / "logs" / f"{g.name}.log"): g
            for g in groups
        }
        for future in concurrent.futures.as_completed(futures):
            group = futures[future]
            print(f"lab.mutation: {group.name} done in {future.result() / 60:.1f} min", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.mutation", description=__doc__.splitlines()[0])
    parser.add_argument("--group", action="append", choices=[g.name for g in GROUPS], help="only these groups")
    parser.add_argument("--parallel", type=int, default=2, help="groups run at once (default 2)")
    parser.add_argument("--children", type=int, default=2, help="mutmut's test processes per group (default 2)")
    parser.add_argument(
        "--summary", action="store_true", help="print the last report's scores (what `make lab` shows beside the costs)"
    )
    parser.add_argument("--report-only", action="store_true", help="rebuild the report from the last run")
    parser.add_argument("--write-doc", action="store_true", help="also copy the report to docs/mutation.md")
    args = parser.parse_args(argv)
    if args.summary:
        return print_summary()
    if not MUTMUT.is_file():
        print(f"lab.mutation: mutmut is not installed at {MUTMUT} (make setup installs it)", file=sys.stderr)
        return 2
    groups = [g for g in GROUPS if not args.group or g.name in args.group]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    clock = time.monotonic()
    last_json = REPORT_DIR / "mutation.json"
    last = json.loads(last_json.read_text(encoding="utf-8")) if last_json.is_file() else None
    groups_again: dict[str, str] = {}
    if args.report_only and last is None:
        print("lab.mutation: no run to report on yet (make mutation runs one)", file=sys.stderr)
        return 2
    if args.report_only:
        started, seconds, groups_again = last["started"], last["seconds"], last.get("groups_again", {})
    else:
        run_all(groups, args.parallel, args.children)
        seconds = time.monotonic() - clock
        if last is not None and len(groups) < len(GROUPS):
            # Some groups again, after new tests: the report keeps the others' last results and the whole run's time.
            done = f"{started}, {seconds / 60:.1f} min"
            groups_again = {**last.get("groups_again", {}), **dict.fromkeys((g.name for g in groups), done)}
            started, seconds = last["started"], last["seconds"]
    if groups_again or args.report_only:
        groups = [g for g in GROUPS if (REPORT_DIR / "work" / g.name / "mutants").is_dir()]
    known = equivalents()
    mutants = [m for g in groups for m in collect(g, REPORT_DIR / "work" / g.name)]
    for m in mutants:
        m.equivalent = known.get(m.name, "")
    report = write(mutants, seconds, started, groups_again=groups_again)
    if args.write_doc:
        shutil.copyfile(report, COMMITTED_REPORT)
    total = score(mutants)
    print(
        f"lab.mutation: {total.killed}/{total.mutants} killed ({total.ratio:.1%}), {total.survived} survived, "
        f"{total.timed_out} timed out, {total.other} other, in {seconds / 60:.1f} min -> {report}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
