#!/usr/bin/env bash
# Runs one Trainer integration's real tests in that integration's own
# virtualenv: `bash scripts/integration_tests.sh paddlenlp|paddleformers [pytest args]`.
# The virtualenv (.venv-<name>, or INTEGRATION_VENV) is built or refreshed
# first by scripts/integration_env.sh, the recipe `make train-env` uses too.
set -euo pipefail
cd "$(dirname "$0")/.."

NAME="${1:?usage: scripts/integration_tests.sh paddlenlp|paddleformers [pytest args]}"
shift
bash scripts/integration_env.sh "$NAME"
PY="${INTEGRATION_VENV:-.venv-$NAME}/bin/python"

# The integration modules' docstring examples (and those of the train command,
# which needs PaddleFormers) run here as doctests; every other environment
# skips a module whose Trainer package is missing (conftest.py).
DOCTESTS=(paddle_llrd/integrations)
if [ "$NAME" = paddleformers ]; then
    DOCTESTS+=(paddle_llrd/cli/train_config.py paddle_llrd/cli/train_checks.py paddle_llrd/cli/train_workflows.py
               paddle_llrd/cli/tiny_llama.py)
fi
# INTEGRATION_TESTS (space-separated paths) runs those instead of the whole suite:
# CI's shards (.ci/run).
if [ -n "${INTEGRATION_TESTS:-}" ]; then
    read -r -a TESTS <<< "$INTEGRATION_TESTS"
else
    TESTS=("tests_$NAME" "${DOCTESTS[@]}")
fi
exec "$PY" -m pytest -q "${TESTS[@]}" "$@"
