"""Pretrain the tiny ViT on the source task, then fine-tune copies of it.

Every fine-tuning run starts from the same pretrained weights and, for a
given seed, from the same new head, the same few-shot images and the same
batch order; only the optimizer differs. ``paddle.optimizer.AdamW`` is the
baseline; :class:`paddle_llrd.AdamWDL` with a ViT
:class:`~paddle_llrd.layer_decay.layer_maps.LayerMap` scales each layer's step by
``decay ** (n_layers + 1 - layer id)``. Both use the same
:func:`paddle_llrd.get_scheduler` schedule, weight decay (not on biases and
norms) and gradient clipping.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field

import numpy as np
import paddle

from ..optim.adamwdl import AdamWDL
from ..layer_decay.layer_maps import LayerMap, make_layerwise_fn, no_decay_parameter_names
from ..schedules.registry import get_scheduler
from ..models.vit import TinyViT, TinyViTConfig
from .data import LabelledImages, TransferTask, random_shift
from .metrics import accuracy, relative_layer_change

HEAD_PREFIX = "head."


@dataclass(frozen=True)
class TrainSettings:
    """One optimisation: steps, peak lr, batch size and the schedule around them."""

    steps: int
    learning_rate: float
    batch_size: int
    warmup_ratio: float = 0.1
    schedule: str = "linear"
    weight_decay: float = 0.05
    max_shift: int = 0  # random whole-pixel shifts of each training image (augmentation)


@dataclass
class Pretrained:
    config: TinyViTConfig
    state: dict[str, np.ndarray]  # every parameter, the source head included
    source_test_accuracy: float


@dataclass
class FineTuneRun:
    """One fine-tuning run; everything but ``layer_lrs`` goes to results.json."""

    optimizer: str  # "AdamW" or "AdamWDL"
    layerwise_decay: float  # 1.0 for AdamW
    learning_rate: float
    seed: int
    target_accuracy: float
    source_accuracy_kept: float
    layer_change: dict[str, float]
    final_train_loss: float
    layer_lrs: dict[str, list[float]] = field(default_factory=dict)  # label -> effective lr per step

    def to_json(self) -> dict:
        record = asdict(self)
        del record["layer_lrs"]
        return record


def layer_label(structured_name: str, layer_map: LayerMap) -> str:
    """``"embeddings"``, ``"block N"``, ``"final norm"`` or ``"head"`` for a ViT parameter name."""
    if structured_name.startswith(HEAD_PREFIX):
        return "head"
    layer_id = layer_map.layer_id(structured_name)
    if layer_id == 0:
        return "embeddings"
    if layer_id <= layer_map.n_layers:
        return f"block {layer_id - 1}"
    return "final norm"


def batch_indices(n_examples: int, batch_size: int, steps: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """``steps`` batches that walk through shuffled epochs of ``n_examples`` examples."""
    batch_size = min(batch_size, n_examples)
    order = np.empty(0, dtype="int64")
    for _ in range(steps):
        if len(order) < batch_size:
            order = np.concatenate([order, rng.permutation(n_examples)])
        yield order[:batch_size]
        order = order[batch_size:]


def _predict(fn: Callable, images: np.ndarray, batch_size: int = 512) -> np.ndarray:
    with paddle.no_grad():
        return np.concatenate([fn(paddle.to_tensor(images[i:i + batch_size])).numpy() for i in range(0, len(images), batch_size)])


def _make_optimizer(model: TinyViT, settings: TrainSettings, layerwise_decay: float | None):
    scheduler = get_scheduler(
        settings.schedule,
        learning_rate=settings.learning_rate,
        num_warmup_steps=int(settings.warmup_ratio * settings.steps),
        num_training_steps=settings.steps,
    )
    no_decay = no_decay_parameter_names(model)
    common = dict(
        learning_rate=scheduler,
        parameters=model.parameters(),
        weight_decay=settings.weight_decay,
        apply_decay_param_fun=lambda name: name not in no_decay,
        grad_clip=paddle.nn.ClipGradByGlobalNorm(1.0),
    )
    if layerwise_decay is None:
        return paddle.optimizer.AdamW(**common), scheduler
    layer_map, name_dict = make_layerwise_fn(model, family="vit")
    optimizer = AdamWDL(
        layerwise_decay=layerwise_decay, n_layers=layer_map.n_layers, name_dict=name_dict, set_param_lr_fun=layer_map, **common
    )
    return optimizer, scheduler


def _train(model: TinyViT, data: LabelledImages, settings: TrainSettings, optimizer, scheduler, rng, on_step=None) -> list[float]:
    losses = []
    model.train()
    for step, batch in enumerate(batch_indices(len(data), settings.batch_size, settings.steps, rng)):
        if on_step is not None:
            on_step(step)
        logits = model(paddle.to_tensor(random_shift(data.images[batch], settings.max_shift, rng)))
        loss = paddle.nn.functional.cross_entropy(logits, paddle.to_tensor(data.labels[batch]))
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        scheduler.step()
        losses.append(float(loss))
    model.eval()
    return losses


def pretrain(task: TransferTask, config: TinyViTConfig, settings: TrainSettings, seed: int, on_step=None) -> Pretrained:
    """Train a fresh model on the source task with ``paddle.optimizer.AdamW``."""
    paddle.seed(seed)
    model = TinyViT(config)
    optimizer, scheduler = _make_optimizer(model, settings, layerwise_decay=None)
    _train(model, task.source_train, settings, optimizer, scheduler, np.random.default_rng(seed), on_step)
    source_accuracy = accuracy(_predict(model, task.source_test.images), task.source_test.labels)
    return Pretrained(config, {name: p.numpy().copy() for name, p in model.named_parameters()}, source_accuracy)


def fine_tune(
    pretrained: Pretrained,
    task: TransferTask,
    train_indices: np.ndarray,
    settings: TrainSettings,
    layerwise_decay: float | None,
    seed: int,
    record_lrs: bool = False,
) -> FineTuneRun:
    """Fine-tune a copy of ``pretrained`` on ``task.target_pool[train_indices]``.

    ``layerwise_decay=None`` uses ``paddle.optimizer.AdamW``, a float
    :class:`~paddle_llrd.AdamWDL` with that decay. The head is new (seeded by
    ``seed``); the rest starts from the pretrained weights. With
    ``record_lrs`` the run keeps each layer's effective lr at every step, as
    the optimizer's :meth:`~paddle_llrd.AdamWDL.param_lr_table` reports it
    (``get_lr()`` for AdamW).
    """
    paddle.seed(seed)
    model = TinyViT(pretrained.config)
    backbone = {name: value for name, value in pretrained.state.items() if not name.startswith(HEAD_PREFIX)}
    for name, param in model.named_parameters():
        if name in backbone:
            param.set_value(backbone[name])
    optimizer, scheduler = _make_optimizer(model, settings, layerwise_decay)
    layer_map = LayerMap.from_model(model, family="vit")

    layer_lrs: dict[str, list[float]] = {}

    def record(step: int) -> None:
        if isinstance(optimizer, AdamWDL):
            rows = [(row.name, row.lr) for row in optimizer.param_lr_table()]
        else:
            rows = [(name, float(optimizer.get_lr())) for name, _ in model.named_parameters()]
        for name, lr in rows:
            label = layer_label(name, layer_map)
            # A layer's parameters share one lr: keep the first one's.
            if len(layer_lrs.setdefault(label, [])) == step:
                layer_lrs[label].append(lr)

    losses = _train(
        model, task.target_pool.subset(train_indices), settings, optimizer, scheduler, np.random.default_rng(seed), record if record_lrs else None
    )
    target_accuracy = accuracy(_predict(model, task.target_test.images), task.target_test.labels)
    # The source head, frozen since pretraining, reads the fine-tuned backbone's features.
    source_features = _predict(model.features, task.source_test.images)
    source_logits = source_features @ pretrained.state[HEAD_PREFIX + "weight"] + pretrained.state[HEAD_PREFIX + "bias"]
    after = {name: p.numpy() for name, p in model.named_parameters()}
    return FineTuneRun(
        optimizer="AdamW" if layerwise_decay is None else "AdamWDL",
        layerwise_decay=1.0 if layerwise_decay is None else float(layerwise_decay),
        learning_rate=settings.learning_rate,
        seed=seed,
        target_accuracy=target_accuracy,
        source_accuracy_kept=accuracy(source_logits, task.source_test.labels),
        layer_change=relative_layer_change(backbone, after, lambda name: layer_label(name, layer_map)),
        final_train_loss=float(np.mean(losses[-max(1, len(losses) // 10):])),
        layer_lrs=layer_lrs,
    )
