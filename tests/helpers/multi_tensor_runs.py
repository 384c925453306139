"""Multi-tensor test helpers: a small model of several layer ratios, AdamWDL
built for it, a run of steps recorded after each (weights, and the path each
step took), and the same run on the multi-tensor and the per-parameter path
compared bit for bit (test_multi_tensor.py; test_gpu.py on a GPU).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import paddle
from paddle import nn
from paddle.utils import unique_name

from operator_off import PER_PARAMETER_ONLY
from paddle_llrd import AdamWDL

N_LAYERS = 3


class Blocks(nn.Layer):
    """An embedding, ``N_LAYERS`` blocks of two Linear layers and a head: several layer ratios."""

    def __init__(self, dtype: str = "float32") -> None:
        super().__init__()
        self.embeddings = nn.Layer()
        self.embeddings.word_embeddings = nn.Embedding(10, 6)
        self.encoder = nn.Layer()
        self.encoder.layers = nn.LayerList([nn.Sequential(nn.Linear(6, 5), nn.Linear(5, 6)) for _ in range(N_LAYERS)])
        self.classifier = nn.Linear(6, 2)
        if dtype != "float32":
            self.to(dtype=dtype)

    def forward(self, ids: paddle.Tensor) -> paddle.Tensor:
        hidden = self.embeddings.word_embeddings(ids).astype(self.classifier.weight.dtype)
        for layer in self.encoder.layers:
            hidden = hidden + paddle.tanh(layer(hidden))
        return self.classifier(hidden).astype("float32")


def loss_of(model: nn.Layer, step: int, part: int = 0) -> paddle.Tensor:
    rng = np.random.default_rng(1000 * step + part)
    ids = paddle.to_tensor(rng.integers(0, 10, (4, 3)).astype("int64"))
    target = paddle.to_tensor(rng.standard_normal((4, 3, 2)).astype("float32"))
    return ((model(ids) - target) ** 2).mean()


def build(
    use_multi_tensor: bool | None, model_dtype: str = "float32", model: nn.Layer | None = None, **options: Any
) -> tuple[nn.Layer, AdamWDL]:
    if model is None:
        paddle.seed(7)
        model = Blocks(model_dtype)
    name_dict = {p.name: n for n, p in model.named_parameters()}
    options.setdefault("parameters", model.parameters())
    kwargs: dict[str, Any] = dict(
        learning_rate=0.01, weight_decay=0.05, layerwise_decay=0.7, n_layers=N_LAYERS, name_dict=name_dict,
        apply_decay_param_fun=lambda n: not n.endswith(".b_0"),
    )
    kwargs.update(options)
    if callable(kwargs["parameters"]):
        kwargs["parameters"] = kwargs["parameters"](model)
    return model, AdamWDL(**kwargs, use_multi_tensor=use_multi_tensor)


def default_step(model: nn.Layer, optimizer: AdamWDL, step: int) -> None:
    loss_of(model, step).backward()
    optimizer.step()
    optimizer.clear_grad()


class Run(NamedTuple):
    """One run of a scenario."""

    history: list[dict[str, np.ndarray]]
    """The weights after each step, by structured name."""
    state: dict[str, np.ndarray]
    """The optimizer's state dict at the end, flattened (:func:`flat_state`)."""
    model: nn.Layer
    optimizer: AdamWDL
    paths: list[tuple[str, str | None]]
    """``optimizer.last_update_path`` after each step."""


def run(
    use_multi_tensor: bool | None,
    scenario: Callable[[nn.Layer, AdamWDL, int], None] = default_step,
    steps: int = 5,
    fresh: Callable[[], dict[str, Any]] = dict,
    **options: Any,
) -> Run:
    """``steps`` of ``scenario`` (one optimizer step each); ``fresh()`` gives the options with
    state of their own (schedules), made anew for each run."""
    with unique_name.guard():
        model, optimizer = build(use_multi_tensor, **options, **fresh())
        history, paths = [], []
        for step in range(steps):
            scenario(model, optimizer, step)
            history.append({n: p.numpy().copy() for n, p in model.named_parameters()})
            paths.append(tuple(optimizer.last_update_path))
        state = {k: v.numpy().copy() for k, v in flat_state(optimizer.state_dict()).items()}
    return Run(history, state, model, optimizer, paths)


def flat_state(state: dict[str, Any]) -> dict[str, Any]:
    flat = {}
    for key, value in state.items():
        if isinstance(value, dict):
            flat.update({f"{key}/{k}": v for k, v in value.items() if hasattr(v, "numpy")})
        elif hasattr(value, "numpy"):
            flat[key] = value
    return flat


def assert_same_runs(multi: Run, single: Run) -> None:
    """The same weights after every step and the same optimizer state at the end, bit for bit."""
    assert len(multi.history) == len(single.history)
    for step, (got, expected) in enumerate(zip(multi.history, single.history)):
        assert got.keys() == expected.keys()
        for name in got:
            np.testing.assert_array_equal(got[name], expected[name], err_msg=f"{name} after step {step}")
    assert multi.state.keys() == single.state.keys()
    for key in multi.state:
        np.testing.assert_array_equal(multi.state[key], single.state[key], err_msg=f"state {key}")


def both_paths(scenario: Callable = default_step, steps: int = 5, fresh: Callable = dict, **options: Any) -> Run:
    """``scenario`` with ``use_multi_tensor`` at its default and with ``False``: the same bits
    (:func:`assert_same_runs`); returns the first run, whose ``paths`` say which path it took."""
    multi = run(None, scenario, steps, fresh, **options)
    single = run(False, scenario, steps, fresh, **options)
    assert single.paths == [PER_PARAMETER_ONLY] * steps
    assert_same_runs(multi, single)
    return multi


def elementwise_step(model: nn.Layer, optimizer: AdamWDL, step: int) -> None:
    """loss = sum(p * G), G standard normal: no matmul, which CPU has not for float16/bfloat16."""
    rng = np.random.default_rng(step)
    paddle.add_n([
        (p.astype("float32") * paddle.to_tensor(rng.standard_normal(p.shape).astype("float32"))).sum()
        for p in model.parameters()
    ]).backward()
    optimizer.step()
    optimizer.clear_grad()
