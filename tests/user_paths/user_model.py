"""The model a user-path script trains where a documented snippet leaves the
model to the reader (``model``, ``loader``, ``loss_fn``).

It is what a user's own project module would hold, imported by the script
(``from user_model import ...``), and small enough for a float64 NumPy
reference to train it from the same numbers (``float64_reference.py``):
BERT's parameter names (``embeddings``, ``encoder.layers.N``,
``classifier``), each a ``Linear`` reading the same input, the prediction
their sum, the loss the mean squared error. Its initial weights come from
``initial_value`` through ``ParamAttr`` initializers, so they are the same in
dygraph, under ``to_static`` and in both static programs, which build and
initialise parameters themselves.

Example:
    >>> import paddle
    >>> model = BertNamedLinear(n_layers=2)
    >>> [name for name, _ in model.named_parameters()][:4]
    ['embeddings.weight', 'embeddings.bias', 'encoder.layers.0.weight', 'encoder.layers.0.bias']
    >>> bool((model.embeddings.weight.numpy() == initial_value("embeddings.weight", (4, 3))).all())
    True
"""
from __future__ import annotations

import zlib
from typing import List, Tuple

import numpy as np
import paddle
from paddle import nn

N_FEATURES = 4
N_OUTPUTS = 3
BATCH_SIZE = 8
INIT_SCALE = 0.5


def initial_value(structured_name: str, shape, scale: float = INIT_SCALE) -> np.ndarray:
    """Float32 weights fixed by the parameter's structured name."""
    rng = np.random.RandomState(zlib.crc32(structured_name.encode()))
    return (scale * rng.standard_normal(shape)).astype("float32")


def _linear(prefix: str, scale: float) -> nn.Linear:
    def attr(kind: str, shape):
        value = initial_value(f"{prefix}.{kind}", shape, scale)
        return paddle.ParamAttr(initializer=nn.initializer.Assign(value))

    return nn.Linear(N_FEATURES, N_OUTPUTS, weight_attr=attr("weight", (N_FEATURES, N_OUTPUTS)),
                     bias_attr=attr("bias", (N_OUTPUTS,)))


class Encoder(nn.Layer):
    def __init__(self, n_layers: int, scale: float) -> None:
        super().__init__()
        self.layers = nn.LayerList([_linear(f"encoder.layers.{i}", scale) for i in range(n_layers)])


class BertNamedLinear(nn.Layer):
    """``embeddings(x) + sum(encoder.layers[i](x)) + classifier(x)``."""

    def __init__(self, n_layers: int = 12, init_scale: float = INIT_SCALE) -> None:
        super().__init__()
        self.embeddings = _linear("embeddings", init_scale)
        self.encoder = Encoder(n_layers, init_scale)
        self.classifier = _linear("classifier", init_scale)

    def forward(self, x):
        out = self.embeddings(x) + self.classifier(x)
        for layer in self.encoder.layers:
            out = out + layer(x)
        return out


class _LlamaStack(nn.Layer):
    def __init__(self, n_layers: int, scale: float) -> None:
        super().__init__()
        self.embed_tokens = _linear("model.embed_tokens", scale)
        self.layers = nn.LayerList([_linear(f"model.layers.{i}", scale) for i in range(n_layers)])


class LlamaNamedLinear(nn.Layer):
    """The same sum of ``Linear`` parts as :class:`BertNamedLinear`, named
    like LLaMA/Qwen: ``model.embed_tokens``, ``model.layers.N``, ``lm_head``."""

    def __init__(self, n_layers: int = 4, init_scale: float = INIT_SCALE) -> None:
        super().__init__()
        self.model = _LlamaStack(n_layers, init_scale)
        self.lm_head = _linear("lm_head", init_scale)

    def forward(self, x):
        out = self.model.embed_tokens(x) + self.lm_head(x)
        for layer in self.model.layers:
            out = out + layer(x)
        return out


def loss_fn(prediction, target):
    """Mean squared error."""
    return ((prediction - target) ** 2).mean()


def make_batches(steps: int, seed: int = 0) -> List[Tuple[np.ndarray, np.ndarray]]:
    """``steps`` float32 batches ``(x, y)``, one per train step."""
    rng = np.random.RandomState(seed)
    return [
        (rng.standard_normal((BATCH_SIZE, N_FEATURES)).astype("float32"),
         rng.standard_normal((BATCH_SIZE, N_OUTPUTS)).astype("float32"))
        for _ in range(steps)
    ]


def weights(model: nn.Layer) -> dict:
    """The model's weights by structured name (dygraph)."""
    return {name: param.numpy().copy() for name, param in model.named_parameters()}
