#!/usr/bin/env bash
# `make test-paddlenlp`: the PaddleNLP integration's real tests, in their own
# virtualenv (.venv-paddlenlp, from requirements-paddlenlp.txt) because
# paddlenlp 2.8.1 needs pins that the main environment does not want.
# Extra arguments go to pytest, e.g. `bash scripts/test_paddlenlp.sh -k schedule`.
set -euo pipefail
INTEGRATION_VENV="${PADDLENLP_VENV:-.venv-paddlenlp}" \
    exec bash "$(dirname "$0")/integration_tests.sh" paddlenlp "$@"
