"""The autouse fixture every test folder's conftest.py imports (tests/,
tests_paddlenlp/, tests_paddleformers/): each test starts in dygraph mode from
a fixed seed, so that runs repeat and one test's static mode cannot leak."""
from __future__ import annotations

import numpy as np
import paddle
import pytest

SEED = 2024


@pytest.fixture(autouse=True)
def seeded_dygraph():
    paddle.disable_static()
    paddle.seed(SEED)
    np.random.seed(SEED)
    yield
    paddle.disable_static()
