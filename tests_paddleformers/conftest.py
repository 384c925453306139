"""Fixtures for the PaddleFormers integration tests (run by
scripts/test_paddleformers.sh in .venv-paddleformers, never by the main
`make test`). Helpers are in support.py."""
from __future__ import annotations

import numpy as np
import paddle
import pytest


@pytest.fixture(autouse=True)
def _seeded_dygraph():
    paddle.disable_static()
    paddle.seed(2024)
    np.random.seed(2024)
    yield
    paddle.disable_static()
