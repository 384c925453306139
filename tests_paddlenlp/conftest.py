"""Fixtures for the PaddleNLP integration tests (run by scripts/test_paddlenlp.sh
in .venv-paddlenlp, never by the main `make test`). Helpers are in support.py."""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import paddle
import pytest

# tests_shared/trainer_checks.py: the Trainer-level checks both integrations' suites run
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests_shared"))


@pytest.fixture(autouse=True)
def _seeded_dygraph():
    paddle.disable_static()
    paddle.seed(2024)
    np.random.seed(2024)
    yield
    paddle.disable_static()
