# `make demo` and `make test` are the two set-up commands: each creates or
# refreshes the local virtualenv (.venv) with what it needs before it runs,
# and says what it installs before each pip step (pip -q is silent for a
# minute). `make demo` installs the package, Paddle (CPU) and the demo's
# packages; `make test` adds the test tools; the docs toolchain is installed
# by `make docs` alone. requirements-dev.txt pins every version; it is given
# to pip as constraints (-c), so a pin installs nothing by itself.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# scripts/pip_install.sh: pip install, compiling at install only where Python
# does not write bytecode as it imports.
PIP := bash scripts/pip_install.sh
PIP_INSTALL := $(PIP) $(PY) -c requirements-dev.txt
VENV_STAMP := $(VENV)/.created
DEMO_STAMP := $(VENV)/.demo-installed
STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.docs-installed

.PHONY: install test test-oldest-paddle demo schedules bench docs docs-check chromium test-paddlenlp test-paddleformers train-env gpu-check clean

$(VENV_STAMP):
	@echo "make: creating the virtualenv $(VENV) and upgrading its pip"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) $(PY) --upgrade pip
	touch $@

$(DEMO_STAMP): $(VENV_STAMP) setup.py requirements-dev.txt $(wildcard paddle_llrd/optim/csrc/*)
	@echo "make: installing paddle_llrd with Paddle (CPU) and the demo's packages (tqdm, matplotlib, scikit-learn) into $(VENV)"
	$(PIP_INSTALL) -e '.[cpu,demo]'
	@echo "make: building the fused AdamW operator (once per machine and Paddle; without a compiler AdamWDL runs Paddle's kernels)"
	$(PY) -m paddle_llrd build-operator
	touch $@

$(STAMP): $(DEMO_STAMP)
	@echo "make: installing the test tools (pytest, hypothesis) into $(VENV)"
	$(PIP_INSTALL) -e '.[cpu,demo,test]'
	touch $@

$(DOCS_STAMP): $(DEMO_STAMP)
	@echo "make: installing the docs toolchain (sphinx, furo, sphinx-copybutton, sphinx-mathjax-offline, playwright) into $(VENV)"
	$(PIP_INSTALL) -e '.[cpu,demo,docs]'
	touch $@

install: $(STAMP)

test: install
	$(PY) -m pytest -q

# The core suite on the oldest Paddle setup.py accepts (3.0.0), in its own
# virtualenv: a Paddle upgrade is not the only way to break users. Five files
# run on the pinned Paddle alone (make test): the docs' blocks and shell
# commands as written, the benchmark scripts' tables, the CLI's errors and the
# changes users make between steps as scripts, each a fresh process or
# several; the library they drive is tested here, the execution modes' user
# scripts included (tests/user_paths/test_modes.py, test_to_static_global.py),
# and the same changes between steps too, interleaved in one process
# (tests/optim/test_changes_between_steps.py).
OLDEST_VENV := .venv-paddle-oldest
OLDEST_PINNED_ONLY := tests/user_paths/test_doc_blocks.py tests/user_paths/test_shell_blocks.py \
    tests/test_benchmarks.py tests/cli/test_cli_errors.py tests/optim/test_changes_users_make.py
OLDEST_PY := $(OLDEST_VENV)/bin/python
$(OLDEST_VENV)/.installed: setup.py requirements-paddle-oldest.txt
	test -x $(OLDEST_PY) || $(PYTHON) -m venv $(OLDEST_VENV)
	$(PIP) $(OLDEST_PY) --upgrade pip
	$(PIP) $(OLDEST_PY) -r requirements-paddle-oldest.txt -e '.[test]'
	$(OLDEST_PY) -m paddle_llrd build-operator
	touch $@

test-oldest-paddle: $(OLDEST_VENV)/.installed
	$(OLDEST_PY) -c "import paddle; assert paddle.__version__ == '3.0.0', paddle.__version__"
	$(OLDEST_PY) -m pytest -q $(addprefix --ignore=,$(OLDEST_PINNED_ONLY))

# Each writes a folder of its own: the demo's figures and results.json in demo_output
# (a --quick run's in demo_output/quick), the schedules' plot in schedules_output.
demo: $(DEMO_STAMP)
	$(PY) -m paddle_llrd demo

schedules: $(DEMO_STAMP)
	$(PY) -m paddle_llrd schedules

bench: install
	$(PY) benchmarks/run_all.py

docs: $(DOCS_STAMP)
	$(PY) -m sphinx -W --keep-going -b html -q docs docs/_build/html

# Every page of the built docs in headless Chromium, offline: fails on a code
# block, formula or table that does not fit, or math left as raw LaTeX.
# Without Chromium it says so and skips (fails under CI). DOCS_SCREENSHOTS=DIR
# also writes a full-page PNG of each page into DIR, for a person to look at
# (about 90 s more here; CI leaves it out).
DOCS_SCREENSHOTS ?=
docs-check: docs
	$(PY) scripts/docs_check.py docs/_build/html $(if $(DOCS_SCREENSHOTS),--screenshots $(DOCS_SCREENSHOTS))

# Debian's Chromium and a CJK font (the Chinese pages), for docs-check; needs root.
chromium:
	dpkg -s chromium fonts-wqy-microhei >/dev/null 2>&1 || { apt-get update -q && apt-get install -y -q chromium fonts-wqy-microhei; }

test-paddlenlp:
	bash scripts/test_paddlenlp.sh

test-paddleformers:
	bash scripts/test_paddleformers.sh

# The train command's environment, .venv-paddleformers: PaddleFormers 1.2.0
# and its pins (requirements-paddleformers.txt), which the main .venv does not
# want; the environment make test-paddleformers tests in.
train-env:
	bash scripts/integration_env.sh paddleformers
	@echo "ready: .venv-paddleformers/bin/python -m paddle_llrd train CONFIG.yaml"

# On a CUDA machine only: installs paddlepaddle-gpu in .venv-gpu from Paddle's
# package index (PADDLE_CUDA_TAG, default cu126) or a wheel file
# (PADDLE_GPU_WHEEL), then runs the GPU tests.
gpu-check:
	bash scripts/gpu_check.sh

clean:
	rm -rf $(VENV) $(OLDEST_VENV) .venv-paddlenlp .venv-paddleformers docs/_build build dist *.egg-info demo_output schedules_output bench_output
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
