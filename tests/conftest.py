"""Shared test fixtures: every test starts from a fixed seed in dygraph mode."""
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
