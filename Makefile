# The two commands: `make lab` (the acceptance run, with the report) and `make test` (what CI runs).
# Both do their own set-up first: idempotent, and quick when already done.

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PYTEST := $(VENV)/bin/pytest
NPM_STAMP := backends/node_modules/.installed
APPS_STAMP := fixtures_sites/realapps/node_modules/.installed
VENV_STAMP := $(VENV)/.installed
RESULTS := reports/allure-results

.PHONY: setup chromium test lab bench mutation lint parity-doc clean

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
# workers (each with its own Chromium, fixture server and tap), work-stealing so no worker idles at the end. On two
# cores four keep both busy (98 % in /proc/stat over a run); three took 19 m 44 s where four took 18 m 23 s.
# The release proofs and the backend contract tests (suites/backends) run on every backend, every other test on the
# default one (suites/selection.py); each negative control on one, the whole-app runs (installed, evaluation) on the
# default one — `make lab` runs all of those on every backend. Which suite runs where, and why: docs/lab.md.
# BACKEND=name runs every test on that backend only; WORKERS=1 runs in one process.
WORKERS ?= 4
test: setup lint
	$(PYTEST) suites --benchmark-skip -n $(WORKERS) --dist worksteal --durations=15 $(if $(BACKEND),--backend $(BACKEND))

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
# Both are built even when a suite fails; the exit status is the suites'.
lab: setup
	@rm -rf $(RESULTS) reports/costs
	@status=0; SUITE_BACKENDS=all INSTALLED_BACKENDS=all NEGATIVE_CONTROL_BACKENDS=all FUZZ_EXAMPLES=10000 $(PYTEST) suites --alluredir=$(RESULTS) || status=$$?; \
	$(PY) -m lab.costs || true; \
	$(PY) -m lab.mutation --summary || true; \
	$(PY) -m lab.report || { [ $$status -ne 0 ] || status=1; }; \
	exit $$status

# Mutation testing of the security-critical runtime (lab/mutation.py, docs/lab.md): mutmut over the functions the
# set names, each group against its own suites on the default backend, two groups at once; ≤ 45 min on two cores.
# The report goes to reports/mutation/ (make lab attaches it); WRITE_DOC=1 also updates the committed docs/mutation.md.
mutation: setup
	$(PY) -m lab.mutation $(if $(GROUP),--group $(GROUP)) $(if $(WRITE_DOC),--write-doc)

clean:
	rm -rf reports/allure-results reports/allure-report reports/costs .pytest_cache .ruff_cache .benchmarks
