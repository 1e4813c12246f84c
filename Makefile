# The two commands of the README: `make demo` and `make test`.  Both create the virtual
# environment on first use.  Where a python3 with torch already exists (a GPU machine), the venv
# sees it through --system-site-packages and keeps that CUDA build; elsewhere it gets the CPU
# build `torch==2.13.0` (a plain `pip install torch` would pull a multi-GB CUDA build).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.kernelstitch-installed
DEMO   ?= examples/elementwise_chain.py
KB_SRC ?= ../shared/kernelbench

.PHONY: demo test test-python test-vscode install clean kb

$(STAMP): pyproject.toml setup.py
	@if $(PYTHON) -c "import torch" >/dev/null 2>&1; then \
		echo "using the torch of $(PYTHON)"; $(PYTHON) -m venv --system-site-packages $(VENV); \
	else $(PYTHON) -m venv $(VENV); fi
	@$(BIN)/python -c "import torch" >/dev/null 2>&1 || { \
		echo "installing torch 2.13.0, CPU build (about 200 MB: a minute or two on a fresh machine)"; \
		$(BIN)/python -m pip install -q torch==2.13.0; }
	@echo "installing kernelstitch and its tools into $(VENV)"
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

# Exit status 2 means "written, but no GPU here to verify it": a finished demo on a CPU machine.
demo: $(STAMP)
	$(BIN)/kernelstitch generate $(DEMO) || [ $$? -eq 2 ]

# Both halves at once: the extension's tests (npm ci, tsc, eslint, mocha, then code-server and
# Chromium, mostly waiting on the browser) run at a lower priority beside pytest and use the
# cores pytest leaves idle; their output is printed when they end (kept in build/test-vscode.log:
# the e2e tests empty their own artifacts folder); in a process group of their own, stopped with
# pytest on Ctrl-C.  TEST_SERIAL=1 runs them one after the other.
test: $(STAMP)
ifeq ($(TEST_SERIAL),1)
	$(MAKE) --no-print-directory test-python
	$(MAKE) --no-print-directory test-vscode
else
	@mkdir -p build; rm -f build/test-vscode.rc
	@echo "the extension's tests run beside pytest (log: build/test-vscode.log)"
	@setsid sh -c 'nice -n 10 $(MAKE) --no-print-directory test-vscode >build/test-vscode.log 2>&1; \
	   echo $$? >build/test-vscode.rc' & \
	vs_group=$$!; trap 'kill -- -$$vs_group 2>/dev/null' INT TERM; \
	py=0; $(MAKE) --no-print-directory test-python || py=$$?; wait $$vs_group; \
	cat build/test-vscode.log; vs=$$(cat build/test-vscode.rc); \
	echo "make test: python tests exit $$py, extension tests exit $$vs"; [ "$$py" = 0 ] && [ "$$vs" = 0 ]
endif

# Two or more pytest workers (at most 4): on CI's 2 cores the nvcc spill checks (minutes of ptxas)
# run beside the rest instead of before it (serial: ~16 min; two workers: ~13).  --dist loadgroup:
# tests/conftest.py collects the long tests first and keeps the modules with expensive
# module-scoped fixtures on one worker (see its comment).
test-python: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n auto --maxprocesses 4 --dist loadgroup

# The extension's unit tests, then its end-to-end tests in code-server through headless Chromium
# (vscode-client/e2e/check.sh: installs Node 24, code-server and chromium where missing, in the
# background meanwhile; screenshots in vscode-client/e2e-artifacts/).  The end-to-end tests start
# the server from $(VENV).
test-vscode: $(STAMP)
	vscode-client/e2e/check.sh

# The KernelBench problems as a git-ignored copy that a device call can carry (`carry: [".kb"]`),
# for `scripts/device_bench.sh SECONDS .kb/kernelbench --levels 2` (bench/README.md).  Leaves
# .kb/runs.sqlite (the returned run store) alone.
kb:
	@test -d $(KB_SRC)/level1 || { echo "no KernelBench tree at $(KB_SRC) (set KB_SRC)"; exit 1; }
	@git check-ignore -q .kb || echo /.kb/ >>.git/info/exclude
	rm -rf .kb/kernelbench && mkdir -p .kb && cp -r $(KB_SRC) .kb/kernelbench
	@echo "$$(ls .kb/kernelbench/level*/*.py | wc -l) problems in .kb/kernelbench ($$(du -sh .kb | cut -f1) to carry)"

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
