#!/usr/bin/env bash
# `make test-paddleformers`: the PaddleFormers integration's real tests, in their
# own virtualenv (.venv-paddleformers, from requirements-paddleformers.txt)
# because paddleformers 1.2.0 imports beside Paddle 3.3.1 only with pins that
# the main environment does not want.
# Extra arguments go to pytest, e.g. `bash scripts/test_paddleformers.sh -k resume`.
set -euo pipefail
INTEGRATION_VENV="${PADDLEFORMERS_VENV:-.venv-paddleformers}" \
    exec bash "$(dirname "$0")/integration_tests.sh" paddleformers "$@"
