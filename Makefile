# forensics: the two commands of the README are `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed-$(shell cat setup.cfg pyproject.toml | cksum | cut -d' ' -f1)
DEV_STAMP := $(VENV)/.installed-dev-$(shell cat setup.cfg pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test bench install dev clean screenshot fmt

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(STAMP): | $(PY)
	$(PIP) install -q -e .
	touch $@

$(DEV_STAMP): | $(PY)
	$(PIP) install -q -e '.[dev]'
	touch $@

install: $(STAMP)
dev: $(DEV_STAMP)

demo: $(STAMP)
	$(PY) -m forensics.demo

# ruff (lint and format, configured in pyproject.toml) first, then pytest with one worker per core and
# one more (pytest-xdist; every test is independent of the others' order; tests that share an expensive
# module fixture are one xdist_group, run by one worker). The extra worker keeps the cores busy while
# tests wait on purpose (a gather timeout, grace periods after SIGTERM, a hung git: about 50 s of one
# worker's time on the 2-core machine); docs/benchmarks.md has the figures.
WORKERS ?= $(shell $(PYTHON) -c "import os; print(len(os.sched_getaffinity(0)) + 1)")
test: $(DEV_STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m pytest -q -n $(WORKERS) --dist loadgroup

# Apply ruff's fixes and format the tree (what `make test` checks).
fmt: $(DEV_STAMP)
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

bench: $(DEV_STAMP)
	$(PY) benchmarks/run.py
	$(PY) benchmarks/diff_speed.py
	$(PY) benchmarks/import_speed.py
	$(PY) benchmarks/fleet_speed.py
	$(PY) benchmarks/fleet_nodes_speed.py
	$(PY) benchmarks/snapshot_timeline.py --runs 5

# Render a diff report in headless Chromium (Debian's chromium package) and save a PNG: to
# forensics-report.png (ignored by git) unless asked, e.g. SCREENSHOT=docs/img/diff-report.png to
# refresh the docs' tracked image.
SCREENSHOT ?= forensics-report.png
screenshot: $(STAMP)
	$(PY) benchmarks/screenshot.py -o $(SCREENSHOT) --height 1400

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache forensics-demo
