"""AdamWDL test helpers: small models with BERT-like parameter names, their
batches and gradients, an AdamWDL built for them, and the step-and-compare loop
against the float64 NumPy reference (reference_adamw.py).
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import paddle
from paddle import nn
from paddle.utils import unique_name

from paddle_llrd import AdamWDL
from paddle_llrd.models.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification
from decay_routes import separate_decay
from reference_adamw import ReferenceAdamW, clip_by_global_norm, layer_ratio

N_LAYERS = 2
HIDDEN = 8
VOCAB = 24
SEQ = 6
BATCH = 8
RTOL, ATOL = 1e-5, 1e-6


# --------------------------------------------------------------------- models
def tiny_bert(seed: int = 7, layers: int = N_LAYERS) -> TinyBertForSequenceClassification:
    """PaddleNLP-style names: bert.embeddings.*, bert.encoder.layers.N.*, bert.pooler.*, classifier.*"""
    paddle.seed(seed)
    config = TinyBertConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * HIDDEN,
        max_position_embeddings=SEQ,
    )
    return TinyBertForSequenceClassification(config)


class _Embeddings(nn.Layer):
    def __init__(self, sparse: bool):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, HIDDEN, sparse=sparse)
        self.layer_norm = nn.LayerNorm(HIDDEN)


class _Encoder(nn.Layer):
    def __init__(self, layer_lrs: Mapping[int, float]):
        super().__init__()
        self.layers = nn.LayerList(
            [
                nn.Linear(
                    HIDDEN,
                    HIDDEN,
                    weight_attr=paddle.ParamAttr(learning_rate=layer_lrs.get(i, 1.0)),
                    bias_attr=paddle.ParamAttr(learning_rate=layer_lrs.get(i, 1.0)),
                )
                for i in range(N_LAYERS)
            ]
        )


class _Pooler(nn.Layer):
    def __init__(self):
        super().__init__()
        self.dense = nn.Linear(HIDDEN, HIDDEN)


class _Bert(nn.Layer):
    def __init__(self, sparse: bool, layer_lrs: Mapping[int, float]):
        super().__init__()
        self.embeddings = _Embeddings(sparse)
        self.encoder = _Encoder(layer_lrs)
        self.pooler = _Pooler()


class BertLikeNet(nn.Layer):
    """A BERT-named MLP: optional sparse word embeddings and ParamAttr lrs per layer."""

    def __init__(self, sparse: bool = False, layer_lrs: Mapping[int, float] | None = None):
        super().__init__()
        self.bert = _Bert(sparse, layer_lrs or {})
        self.classifier = nn.Linear(HIDDEN, 2)

    def forward(self, input_ids: paddle.Tensor) -> paddle.Tensor:
        hidden = self.bert.embeddings.word_embeddings(input_ids).mean(axis=1)
        hidden = self.bert.embeddings.layer_norm(hidden)
        for layer in self.bert.encoder.layers:
            hidden = paddle.tanh(layer(hidden))
        return self.classifier(paddle.tanh(self.bert.pooler.dense(hidden)))


def bert_like(seed: int = 7, **kwargs: Any) -> BertLikeNet:
    paddle.seed(seed)
    return BertLikeNet(**kwargs)


def name_dict_of(model: nn.Layer) -> dict[str, str]:
    return {p.name: n for n, p in model.named_parameters()}


def weights_of(model: nn.Layer) -> dict[str, np.ndarray]:
    return {n: p.astype("float32").numpy().astype(np.float64) for n, p in model.named_parameters()}


def no_bias_or_norm(name_dict: Mapping[str, str]) -> Callable[[str], bool]:
    """An apply_decay_param_fun on Paddle names: decay weights, not biases or LayerNorm."""
    return lambda paddle_name: not (
        name_dict[paddle_name].endswith("bias") or "norm" in name_dict[paddle_name]
    )


def decays_structured(structured: str) -> bool:
    return not (structured.endswith("bias") or "norm" in structured)


# ---------------------------------------------------------------- the loop
def batches(steps: int, seed: int = 11, ids_high: int = VOCAB) -> list[tuple[paddle.Tensor, paddle.Tensor]]:
    rng = np.random.default_rng(seed)
    return [
        (
            paddle.to_tensor(rng.integers(0, ids_high, (BATCH, SEQ))),
            paddle.to_tensor(rng.integers(0, 2, (BATCH,))),
        )
        for _ in range(steps)
    ]


def gradients_of(model: nn.Layer) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Dense float64 gradients by structured name, and the rows of sparse ones."""
    return named_gradients(model.named_parameters())


def named_gradients(
    named_parameters: Iterable[tuple[str, paddle.Tensor]],
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Dense float64 gradients by the given names, and the rows of sparse (SelectedRows) ones."""
    grads, rows = {}, {}
    for name, param in named_parameters:
        grad = param._grad_ivar()
        if grad is None:
            continue
        if grad.is_selected_rows():
            row_ids = np.asarray(grad.rows(), dtype=np.int64)
            dense = np.zeros(param.shape, dtype=np.float64)
            np.add.at(dense, row_ids, grad.numpy().astype(np.float64))
            grads[name], rows[name] = dense, row_ids
        else:
            grads[name] = grad.astype("float32").numpy().astype(np.float64)
    return grads, rows


def assert_matches(model: nn.Layer, expected: Mapping[str, np.ndarray], context: str, **tolerances: float) -> None:
    for name, value in weights_of(model).items():
        np.testing.assert_allclose(
            value,
            expected[name],
            rtol=tolerances.get("rtol", RTOL),
            atol=tolerances.get("atol", ATOL),
            err_msg=f"{name} ({context})",
        )


def train_and_compare(
    model: nn.Layer,
    optimizer: paddle.optimizer.Optimizer,
    reference: ReferenceAdamW,
    *,
    steps: int = 6,
    lr_at: Callable[[int], float],
    reference_options: Mapping[str, Any] | Callable[[int], Mapping[str, Any]] = {},
    scheduler: paddle.optimizer.lr.LRScheduler | None = None,
    clip_norm: float | None = None,
    data: list | None = None,
    paths: list | None = None,
) -> list[dict[str, np.ndarray]]:
    """Cross-entropy steps; after each, every weight must match the reference. ``paths``, if
    given, gets the optimizer's ``last_update_path`` after each step."""
    history = []
    for step, (ids, labels) in enumerate(data or batches(steps)):
        loss = nn.functional.cross_entropy(model(ids), labels)
        loss.backward()
        grads, rows = gradients_of(model)
        optimizer.step()
        if paths is not None:
            paths.append(tuple(optimizer.last_update_path))
        optimizer.clear_grad()
        if scheduler is not None:
            scheduler.step()
        if clip_norm is not None:
            grads = clip_by_global_norm(grads, clip_norm)
        options = dict(reference_options(step) if callable(reference_options) else reference_options)
        if rows and "rows" not in options:
            options["rows"] = lambda name: rows.get(name)
        reference.step(grads, lr_at(step), **options)
        assert_matches(model, reference.params, f"step {step}")
        history.append(weights_of(model))
    return history


def to_static_train_and_compare(
    model: nn.Layer,
    optimizer: paddle.optimizer.Optimizer,
    reference: ReferenceAdamW,
    *,
    steps: int,
    lr_at: Callable[[int], float],
    reference_options: Mapping[str, Any] | Callable[[int], Mapping[str, Any]] = {},
) -> None:
    """As :func:`train_and_compare`, with the whole train step under ``paddle.jit.to_static``
    (SOT), whose optimizer step after ``loss.backward()`` (a graph break) runs eagerly."""
    # Paddle imports modules lazily in the first optimizer step of a process. Under
    # pytest that import runs pytest's import hook, whose frames SOT translates (and
    # fails on) inside the traced step; so a to_static test would pass only after another
    # test had stepped an optimizer. One eager step of a throwaway optimizer first.
    warm_up = nn.Linear(2, 2)
    warm_up(paddle.ones([1, 2])).sum().backward()
    paddle.optimizer.AdamW(parameters=warm_up.parameters()).step()

    recorded = {}

    @paddle.jit.to_static
    def train_step(ids, labels):
        loss = nn.functional.cross_entropy(model(ids), labels)
        loss.backward()
        for name, param in model.named_parameters():
            recorded[name] = param.grad.numpy().astype(np.float64)
        optimizer.step()
        optimizer.clear_grad()
        return loss

    for step, (ids, labels) in enumerate(batches(steps)):
        train_step(ids, labels)
        options = reference_options(step) if callable(reference_options) else reference_options
        reference.step(dict(recorded), lr_at(step), **options)
        assert_matches(model, reference.params, f"step {step}")


def split_parameters(model: nn.Layer, part: str) -> tuple[list[paddle.Tensor], list[paddle.Tensor]]:
    """The parameters whose structured name contains ``part``, and the others (two parameter groups)."""
    named = list(model.named_parameters())
    return [p for n, p in named if part in n], [p for n, p in named if part not in n]


def ratio_fn(decay_rate: float, n_layers: int = N_LAYERS) -> Callable[[str], float]:
    return lambda structured: layer_ratio(structured, decay_rate, n_layers)


@contextlib.contextmanager
def fresh_names() -> Iterator[None]:
    """Same parameter/accumulator names in every block (for checkpoints in one process)."""
    with unique_name.guard():
        yield


def make_adamwdl(model: nn.Layer, *, general: bool = False, **kwargs: Any) -> AdamWDL:
    kwargs.setdefault("parameters", model.parameters())
    kwargs.setdefault("name_dict", name_dict_of(model))
    kwargs.setdefault("n_layers", N_LAYERS)
    return separate_decay(AdamWDL(**kwargs), general)
