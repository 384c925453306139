"""Identical training runs ("worlds") that take every change a user or a framework makes
between steps, for the stateful randomized test of AdamWDL's default step.

A world is one model (embeddings, two encoder blocks, a branch used only some steps,
a head and a 0-D scale: every kind of parameter the step lays out) with its optimizer:
AdamWDL's default step (``"default"``), AdamWDL with ``use_multi_tensor=False``
(``"per_parameter"``) or ``paddle.optimizer.AdamW`` (``"adamw"``, runs without layer
ratios). Every change (:meth:`World.apply`) and every training step is made the same
way in every world, as a user writes it; :func:`differences` lists what is not equal
bit for bit afterwards: weights, moments and beta powers, ``p.grad``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import paddle
from paddle import nn

from paddle_llrd import AdamWDL

VOCAB, HIDDEN, SEQ, BATCH = 16, 8, 4, 3
KINDS_WITH_RATIOS = ("default", "per_parameter")
KINDS_WITHOUT_RATIOS = ("default", "per_parameter", "adamw")
HEAD = ("head.weight", "head.bias")


class Block(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(HIDDEN, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN)
        self.read_transposed = False

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        if self.read_transposed:  # as PyTorch's [out, in] layout is read: W.T, so a strided gradient
            return self.norm(paddle.tanh(x @ self.linear.weight.T + self.linear.bias))
        return self.norm(paddle.tanh(self.linear(x)))


class Encoder(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.LayerList([Block() for _ in range(2)])


class Net(nn.Layer):
    """Structured names ``embeddings.weight``, ``encoder.layers.N.*``, ``branch.*``, ``head.*``, ``scale``."""

    def __init__(self) -> None:
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, HIDDEN)
        self.encoder = Encoder()
        self.branch = nn.Linear(HIDDEN, HIDDEN)
        self.head = nn.Linear(HIDDEN, 4)
        self.scale = self.create_parameter([], default_initializer=nn.initializer.Constant(1.25))
        self.use_branch = True

    def forward(self, ids: paddle.Tensor) -> paddle.Tensor:
        hidden = self.embeddings(ids)
        for block in self.encoder.layers:
            hidden = block(hidden)
        if self.use_branch:
            hidden = hidden + self.branch(hidden)
        return self.head(hidden) * self.scale


def decay_rule(decayed: frozenset[str], name_dict: dict[str, str]) -> Callable[[str], bool]:
    """``apply_decay_param_fun`` by structured name (every world's own Paddle names)."""
    return lambda name: name_dict[name] in decayed


def clip(kind: str | None) -> Any:
    return {None: None, "global_norm": nn.ClipGradByGlobalNorm(0.05), "norm": nn.ClipGradByNorm(0.02),
            "value": nn.ClipGradByValue(0.004)}[kind]


class World:
    """One run: ``kind`` of optimizer over :class:`Net`, in one or two parameter groups."""

    def __init__(self, kind: str, *, ratios: bool, grouped: bool, threads: int, clip_kind: str | None) -> None:
        paddle.seed(5)
        self.kind = kind
        self.model = Net()
        self.name_dict = {p.name: n for n, p in self.model.named_parameters()}
        self.by_name = dict(self.model.named_parameters())
        params = list(self.model.parameters())
        parameters: list[Any] = params
        if grouped:
            parameters = [{"params": params[:6]}, {"params": params[6:], "learning_rate": 0.5, "weight_decay": 0.02}]
        options: dict[str, Any] = {"learning_rate": 0.01, "parameters": parameters, "weight_decay": 0.05,
                                   "grad_clip": clip(clip_kind)}
        self.optimizer = self._optimizer(options, ratios=ratios, threads=threads)
        self.second: Any = None
        self.ratios, self.threads = ratios, threads

    def _optimizer(self, options: dict[str, Any], *, ratios: bool, threads: int) -> Any:
        if self.kind == "adamw":
            return paddle.optimizer.AdamW(**options)
        layerwise = {"layerwise_decay": 0.7, "n_layers": 2, "name_dict": self.name_dict} if ratios else {
            "set_param_lr_fun": None}
        return AdamWDL(**options, **layerwise, num_threads=threads,
                       use_multi_tensor=False if self.kind == "per_parameter" else None)

    # ------------------------------------------------------------ changes
    def apply(self, change: str, *args: Any) -> None:
        getattr(self, "_" + change)(*args)

    def _optimizer_clip(self, kind: str | None) -> None:  # as fleet's wrappers assign it
        self.optimizer._grad_clip = clip(kind)

    def _group_clip(self, group: int, kind: str | None) -> None:
        groups = self.optimizer._param_groups
        if isinstance(groups[0], dict):
            groups[group % len(groups)]["grad_clip"] = clip(kind)

    def _need_clip(self, left_out: frozenset[str], off: Any, on: Any) -> None:
        for name, param in self.by_name.items():
            param.need_clip = off if name in left_out else on

    def _regularizer(self, name: str, coeff: float | None) -> None:
        self.by_name[name].regularizer = None if coeff is None else paddle.regularizer.L2Decay(coeff)

    def _decay_rule(self, decayed: frozenset[str] | None) -> None:
        self.optimizer._apply_decay_param_fun = None if decayed is None else decay_rule(decayed, self.name_dict)

    def _weight_decay(self, group: int, value: float | None) -> None:
        """The optimizer's weight decay (a group's, where grouped), None: a Tensor (Paddle's AdamW reads its value)."""
        coeff = paddle.to_tensor(0.3) if value is None else value
        groups = self.optimizer._param_groups
        if isinstance(groups[0], dict):
            groups[group % len(groups)]["weight_decay"] = coeff
        else:
            self.optimizer._weight_decay = coeff

    def _set_value(self, name: str, seed: int) -> None:
        param = self.by_name[name]
        value = np.random.default_rng(seed).standard_normal(param.shape).astype("float32")
        param.set_value(value)

    def _freeze(self, name: str, frozen: bool) -> None:
        self.by_name[name].stop_gradient = frozen

    def _branch(self, used: bool) -> None:
        self.model.use_branch = used

    def _weights_read_transposed(self, used: bool) -> None:
        for block in self.model.encoder.layers:
            block.read_transposed = used

    def _set_lr(self, lr: float) -> None:
        self.optimizer.set_lr(lr)

    def _layerwise_decay(self, decay: float) -> None:
        if self.kind != "adamw" and self.ratios:
            self.optimizer.layerwise_decay = decay

    def _ratio_function(self, ratios: dict[str, float] | None) -> None:
        if self.kind == "adamw" or not self.ratios:
            return
        if ratios is None:
            self.optimizer.set_param_lr_fun = None
            return
        name_dict = self.name_dict

        def by_structured_name(param: Any) -> float:
            return ratios.get(name_dict[param.name], 1.0)

        by_structured_name.pure_in_name = True
        self.optimizer.set_param_lr_fun = by_structured_name

    def _second_optimizer(self) -> None:
        """Another optimizer over the head, which steps after the first and never clears."""
        params = [self.by_name[name] for name in HEAD]
        if self.kind == "adamw":
            self.second = paddle.optimizer.AdamW(learning_rate=0.02, parameters=params, weight_decay=0.1)
        else:
            self.second = AdamWDL(learning_rate=0.02, parameters=params, weight_decay=0.1, set_param_lr_fun=None,
                                  num_threads=self.threads,
                                  use_multi_tensor=False if self.kind == "per_parameter" else None)

    # ------------------------------------------------------------ training
    def backward(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        ids = paddle.to_tensor(rng.integers(0, VOCAB, [BATCH, SEQ]))
        target = paddle.to_tensor(rng.standard_normal([BATCH, SEQ, 4]).astype("float32"))
        ((self.model(ids) - target) ** 2).mean().backward()

    def step(self) -> None:
        self.optimizer.step()
        if self.second is not None:
            self.second.step()

    def clear(self, how: str) -> None:
        if how == "zero":
            self.optimizer.clear_grad()
        elif how == "release":
            self.optimizer.clear_grad(set_to_zero=False)

    # ------------------------------------------------------------ state
    def state(self) -> dict[str, np.ndarray]:
        """Every weight, gradient and optimizer tensor by structured name."""
        found: dict[str, np.ndarray] = {}
        for name, param in self.by_name.items():
            found[f"{name} (weight)"] = param.numpy()
            # (a strided gradient's array is strided too: made contiguous to compare its bits)
            found[f"{name} (grad)"] = None if param.grad is None else np.ascontiguousarray(param.grad.numpy())
        for index, optimizer in enumerate((self.optimizer, self.second)):
            if optimizer is None:
                continue
            for key, value in optimizer.state_dict().items():
                if not isinstance(value, paddle.Tensor):
                    continue
                for param_name, structured in self.name_dict.items():
                    if key.startswith(param_name + "_"):
                        found[f"{structured} (optimizer {index}: {key[len(param_name) + 1:]})"] = value.numpy()
        return found


def differences(worlds: Sequence[World]) -> list[str]:
    """What differs between the first world and the others, bit for bit."""
    first = worlds[0].state()
    found = []
    for world in worlds[1:]:
        other = world.state()
        for key in sorted(set(first) | set(other)):
            a, b = first.get(key), other.get(key)
            same = (a is None and b is None) or (a is not None and b is not None and a.shape == b.shape
                                                  and np.array_equal(np.atleast_1d(a).view(np.uint8),
                                                                     np.atleast_1d(b).view(np.uint8)))
            if not same:
                found.append(f"{key}: {worlds[0].kind} != {world.kind}")
    return found
