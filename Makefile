# The two commands: `make lab` (the acceptance run, with the report) and `make test` (what CI runs).
# Both do their own set-up first: idempotent, and quick when already done.

SHELL := /bin/bash
# Bytecode caches on, whatever the environment says (some sandboxes set PYTHONDONTWRITEBYTECODE): without them each
# pytest worker, child pytest and app subprocess compiles the tree again and pytest rewrites every test module's
# asserts again (3 s of CPU per pytest process, on two cores that every test shares).
unexport PYTHONDONTWRITEBYTECODE
VENV := .venv
PY := $(VENV)/bin/python
PYTEST := $(VENV)/bin/pytest
NPM_STAMP := backends/node_modules/.installed
APPS_STAMP := fixtures_sites/realapps/node_modules/.installed
VENV_STAMP := $(VENV)/.installed
ALLURE_RESULTS := reports/allure-results
LAB_ENV := SUITE_BACKENDS=all INSTALLED_BACKENDS=all NEGATIVE_CONTROL_BACKENDS=all FUZZ_EXAMPLES=10000

# SHARDS=N SHARD=i (make test, make lab): run the i-th of N shards of the run, balanced by the test durations a full
# run recorded (suites/durations/, refreshed by `make durations`) with pytest-split (its least_duration algorithm, set
# in pyproject.toml). Every shard does its own set-up and splits the same collection the same way, so the N shards
# together run each test exactly once: one machine per shard, each with the same tree. docs/scale.md.
SHARDS ?= 1
SHARD ?= 1
split = $(if $(filter-out 1,$(SHARDS)),--splits $(SHARDS) --group $(SHARD) --durations-path suites/durations/$(1).json)
SHARD_DIR := reports/shard-$(SHARD)

.PHONY: setup chromium test lab report durations bench mutation lint parity-doc clean

setup: chromium $(VENV_STAMP) $(NPM_STAMP) $(APPS_STAMP)

# Debian's Chromium (never a browser download of a test tool's own).
chromium:
	@if [ -x /usr/lib/chromium/chromium ] || [ -n "$$CHROMIUM" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
	  echo "Chromium is missing: install Debian's chromium (apt-get install -y chromium chromium-driver) or set CHROMIUM" >&2; \
	  exit 1; \
	fi; \
	echo "setup: installing Debian chromium and chromium-driver (apt-get)"; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null \
	  || { echo "setup: apt-get could not install chromium; see the output above" >&2; exit 1; }

$(VENV_STAMP): pyproject.toml
	@command -v python3 >/dev/null || { echo "python3 is missing: install Python 3.11 or newer" >&2; exit 1; }
	@echo "setup: Python environment in $(VENV)"
	@python3 -m venv $(VENV)
	@$(VENV)/bin/pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $@

$(NPM_STAMP): backends/package.json backends/package-lock.json
	@command -v npm >/dev/null || { echo "npm is missing: install Node.js 20 and npm (apt-get install -y nodejs npm)" >&2; exit 1; }
	@echo "setup: pinned npm servers (npm ci in backends/)"
	@cd backends && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The real-apps corpus: third-party apps' published bundles, pinned exactly, served offline by the fixture server
# (fixtures_sites/scenarios/realapps.py). Their install scripts never run: the lab serves files, it builds nothing.
$(APPS_STAMP): fixtures_sites/realapps/package.json fixtures_sites/realapps/package-lock.json
	@command -v npm >/dev/null || { echo "npm is missing: install Node.js 20 and npm (apt-get install -y nodejs npm)" >&2; exit 1; }
	@echo "setup: pinned real apps (npm ci in fixtures_sites/realapps/)"
	@cd fixtures_sites/realapps && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

lint: $(VENV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Everything CI proves: lint, then every suite (benchmarks skipped: timings are not pass/fail), on four xdist
# workers (each with its own Chromium, fixture server and tap), work-stealing so no worker idles at the end. Four,
# because many proofs mostly wait (a hung page's bound, a held request, a client's pacing) while others work the CPU:
# on three the two cores were 1.80 busy on average (/proc/stat each second), on four 1.89-1.95. The wall times
# (9 m 21 s - 10 m 47 s on four, 9 m 35 s - 10 m 34 s on three, stop 41) differ less than the machine drifts in a
# day. docs/lab.md.
# The release proofs and the backend contract tests (suites/backends) run on every backend, every other test on the
# default one (suites/selection.py); each negative control on one, the whole-app runs (installed, evaluation) on the
# default one — `make lab` runs all of those on every backend. Which suite runs where, and why: docs/lab.md.
# BACKEND=name runs every test on that backend only; WORKERS=1 runs in one process; SHARDS=N SHARD=i one shard.
WORKERS ?= 4
test: setup lint
	$(PYTEST) suites --benchmark-skip -n $(WORKERS) --dist worksteal --durations=15 $(if $(BACKEND),--backend $(BACKEND)) \
	  $(call split,make-test)

# docs/parity.md is generated from the parity ledger (suites/parity/ledger.py); `pytest suites/parity` checks it.
parity-doc: $(VENV_STAMP)
	$(PY) -m suites.parity.ledger --write

RAW_SNAPSHOTS := $(foreach b,playwright_mcp chrome_devtools_mcp,\
  'suites/backends/test_backends.py::test_catalogue_snapshot_parses_hundreds_of_elements_in_far_fewer_tokens[$(b)-/catalogue/]')

# Costs only, on every backend: token budgets, act latency against the raw upstream side by side, each scenario's
# cost per backend (the parity tasks; their negative controls are skipped here, `make test` runs them), and the
# task-cost table: every task of suites/bench/tasks.py run by ours and by the raw @playwright/mcp and
# chrome-devtools-mcp (make test: one).
bench: setup
	@rm -rf reports/costs
	SUITE_BACKENDS=all $(PYTEST) suites/budgets suites/bench suites/parity/test_parity_tasks.py $(RAW_SNAPSHOTS) -m "not negative_control" -s
	@$(PY) -m lab.costs

# The acceptance run: every suite and benchmark on every backend with Allure results, then the cost summary and
# the single-file offline report (which carries the summary, its plot and the parity table on its front page).
# Both are built even when a suite fails; the exit status is the suites'. A shard (SHARDS=N SHARD=i) writes its
# results, cost figures and shard.json (which tests it ran of which collection: suites/shards.py) to
# reports/shard-<i>/ and builds no report: `make report RESULTS="…"` merges the shards'. It runs as `python -m pytest`
# (as the shard proof's children do), which puts the checkout on sys.path: `-p suites.shards` is loaded before any
# conftest could, and `suites` is not an installed package.
lab: setup
ifeq ($(SHARDS),1)
	@rm -rf $(ALLURE_RESULTS) reports/costs
	@status=0; $(LAB_ENV) $(PYTEST) suites --alluredir=$(ALLURE_RESULTS) || status=$$?; \
	$(build_report) || { [ $$status -ne 0 ] || status=1; }; \
	exit $$status
else
	@rm -rf $(SHARD_DIR) && mkdir -p $(SHARD_DIR)
	$(LAB_ENV) LAB_COSTS_DIR=$(SHARD_DIR)/costs $(PY) -m pytest suites --alluredir=$(SHARD_DIR)/allure-results \
	  $(call split,make-lab) -p suites.shards --shards-record $(SHARD_DIR)/shard.json
endif

# The one cost summary and offline report: of this machine's last `make lab`, or, with RESULTS="reports/shard-1 …"
# (each shard's folder, copied here from its machine), of all the shards, merged first into reports/ (lab/merge.py):
# the same tests, figures and parity table as one machine's run.
build_report = $(PY) -m lab.costs || true; $(PY) -m lab.mutation --summary || true; $(PY) -m lab.report
report: $(VENV_STAMP) $(NPM_STAMP)
	@$(if $(RESULTS),$(PY) -m lab.merge $(RESULTS) || exit $$?;) $(build_report)

# The durations SHARDS splits by, refreshed: make test's run and make lab's, each storing every test's time
# (pytest-split's --store-durations) in suites/durations/. About as long as the two runs; commit the two files.
durations: setup
	@status=0; \
	$(PYTEST) suites --benchmark-skip -n $(WORKERS) --dist worksteal --store-durations --clean-durations \
	  --durations-path suites/durations/make-test.json || status=$$?; \
	$(LAB_ENV) $(PYTEST) suites --store-durations --clean-durations --durations-path suites/durations/make-lab.json \
	  || status=$$?; \
	exit $$status

# Mutation testing of the security-critical runtime (lab/mutation.py, docs/lab.md): mutmut over the functions the
# set names, each group against its own suites on the default backend, two groups at once; ≤ 45 min on two cores.
# The report goes to reports/mutation/ (make lab attaches it); WRITE_DOC=1 also updates the committed docs/mutation.md.
mutation: setup
	$(PY) -m lab.mutation $(if $(GROUP),--group $(GROUP)) $(if $(WRITE_DOC),--write-doc)

clean:
	rm -rf reports/allure-results reports/allure-report reports/costs reports/shard-* .pytest_cache .ruff_cache .benchmarks
