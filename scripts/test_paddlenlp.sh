#!/usr/bin/env bash
# `make test-paddlenlp`: the PaddleNLP integration's real tests, in their own
# virtualenv (.venv-paddlenlp) because paddlenlp 2.8.1 needs pins that the main
# environment does not want. The virtualenv is (re)installed only when
# requirements-paddlenlp.txt, setup.py or this script changed since the last
# install (the stamp file), like the Makefile's main .venv.
# Extra arguments go to pytest, e.g. `bash scripts/test_paddlenlp.sh -k schedule`.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
VENV="${PADDLENLP_VENV:-.venv-paddlenlp}"
PY="$VENV/bin/python"
STAMP="$VENV/.installed"
SCRIPT="scripts/test_paddlenlp.sh"

stale=0
if [ ! -f "$STAMP" ]; then
    stale=1
else
    for dependency in requirements-paddlenlp.txt setup.py "$SCRIPT"; do
        if [ "$dependency" -nt "$STAMP" ]; then stale=1; fi
    done
fi

if [ "$stale" = 1 ]; then
    test -x "$PY" || "$PYTHON" -m venv "$VENV"
    "$PY" -m pip install -q --upgrade pip
    "$PY" -m pip install -q -r requirements-paddlenlp.txt -e .
    touch "$STAMP"
fi

# The integration module's docstring example runs here as a doctest; the main
# test suite skips that module when paddlenlp is not installed (conftest.py).
exec "$PY" -m pytest -q tests_paddlenlp paddle_llrd/integrations "$@"
