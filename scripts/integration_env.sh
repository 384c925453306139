#!/usr/bin/env bash
# Builds (or refreshes) one Trainer integration's own virtualenv:
# `bash scripts/integration_env.sh paddlenlp|paddleformers`. Each integration
# needs pins that the main environment does not want, so it gets
# .venv-<name> (or INTEGRATION_VENV), installed from requirements-<name>.txt
# plus this package (-e .). The virtualenv is (re)installed only when the
# requirements file, setup.py or this script changed since the last install
# (the stamp file), like the Makefile's main .venv. `make train-env` (the
# train command's environment) and `make test-paddleformers` (its tests) both
# build .venv-paddleformers here, so the tests run in the environment users get.
set -euo pipefail
cd "$(dirname "$0")/.."

NAME="${1:?usage: scripts/integration_env.sh paddlenlp|paddleformers}"
case "$NAME" in
    paddlenlp | paddleformers) ;;
    *) echo "unknown integration '$NAME': expected paddlenlp or paddleformers" >&2; exit 2 ;;
esac

PYTHON="${PYTHON:-python3}"
VENV="${INTEGRATION_VENV:-.venv-$NAME}"
PY="$VENV/bin/python"
STAMP="$VENV/.installed"
REQUIREMENTS="requirements-$NAME.txt"

# One install at a time: a second caller (CI runs this suite in two shards, one
# per lane) waits for the first one's install and then finds it current.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$VENV.lock"
    flock 9
fi

stale=0
if [ ! -f "$STAMP" ]; then
    stale=1
else
    for dependency in "$REQUIREMENTS" setup.py scripts/integration_env.sh; do
        if [ "$dependency" -nt "$STAMP" ]; then stale=1; fi
    done
fi

if [ "$stale" = 1 ]; then
    test -x "$PY" || "$PYTHON" -m venv "$VENV"
    bash scripts/pip_install.sh "$PY" --upgrade pip
    bash scripts/pip_install.sh "$PY" -r "$REQUIREMENTS" -e .
    "$PY" -m paddle_llrd build-operator
    touch "$STAMP"
fi
