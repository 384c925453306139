#!/usr/bin/env bash
# Runs one Trainer integration's real tests in that integration's own
# virtualenv: `bash scripts/integration_tests.sh paddlenlp|paddleformers [pytest args]`.
# Each integration needs pins that the main environment does not want, so it
# gets .venv-<name>, installed from requirements-<name>.txt plus this package
# (-e .). The virtualenv is (re)installed only when the requirements file,
# setup.py or these scripts changed since the last install (the stamp file),
# like the Makefile's main .venv.
set -euo pipefail
cd "$(dirname "$0")/.."

NAME="${1:?usage: scripts/integration_tests.sh paddlenlp|paddleformers [pytest args]}"
shift
case "$NAME" in
    paddlenlp | paddleformers) ;;
    *) echo "unknown integration '$NAME': expected paddlenlp or paddleformers" >&2; exit 2 ;;
esac

PYTHON="${PYTHON:-python3}"
VENV="${INTEGRATION_VENV:-.venv-$NAME}"
PY="$VENV/bin/python"
STAMP="$VENV/.installed"
REQUIREMENTS="requirements-$NAME.txt"

stale=0
if [ ! -f "$STAMP" ]; then
    stale=1
else
    for dependency in "$REQUIREMENTS" setup.py scripts/integration_tests.sh "scripts/test_$NAME.sh"; do
        if [ "$dependency" -nt "$STAMP" ]; then stale=1; fi
    done
fi

if [ "$stale" = 1 ]; then
    test -x "$PY" || "$PYTHON" -m venv "$VENV"
    "$PY" -m pip install -q --upgrade pip
    "$PY" -m pip install -q -r "$REQUIREMENTS" -e .
    touch "$STAMP"
fi

# The integration modules' docstring examples (and those of the train command,
# which needs PaddleFormers) run here as doctests; every other environment
# skips a module whose Trainer package is missing (conftest.py).
DOCTESTS=(paddle_llrd/integrations)
if [ "$NAME" = paddleformers ]; then DOCTESTS+=(paddle_llrd/cli/train.py paddle_llrd/cli/train_checks.py); fi
exec "$PY" -m pytest -q "tests_$NAME" "${DOCTESTS[@]}" "$@"
