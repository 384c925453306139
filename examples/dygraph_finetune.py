"""Fine-tune a small BERT in dygraph with AdamWDL, a warmup schedule, gradient clipping and an EMA.

Run::

    python examples/dygraph_finetune.py              # 300 steps, prints loss and accuracies
    python examples/dygraph_finetune.py --steps 5    # a quick check

The recipe is the usual one for BERT fine-tuning with layer-wise learning-rate
decay (LLRD):

1. ``name_dict = {p.name: n for n, p in model.named_parameters()}`` maps each
   Paddle parameter name (``linear_3.w_0``) to its structured name
   (``bert.encoder.layers.1.linear1.weight``), from which
   :func:`paddle_llrd.layerwise_lr_decay` reads the layer.
2. ``AdamWDL(..., layerwise_decay=0.8, n_layers=L, name_dict=name_dict)``:
   encoder layer ``i`` trains at ``0.8 ** (L - i)`` times the learning rate,
   the embeddings at ``0.8 ** (L + 1)``, the pooler and classifier at the full
   rate. Weight decay (here not on biases and LayerNorm weights) uses each
   parameter's base learning rate, once per step.
3. ``LinearDecayWithWarmup``: a linear warmup over the first 10% of the steps,
   then a linear decay to 0; ``scheduler.step()`` after every optimizer step.
4. ``ClipGradByGlobalNorm(1.0)`` clips the gradients before the update.
5. :class:`paddle_llrd.ExponentialMovingAverage` keeps an average of the
   weights (``ema.register()`` once, ``ema.update()`` after every optimizer
   step; the decay warm-up ``min(d, (1 + n) / (10 + n))`` lets it forget the
   initial weights quickly). Evaluation runs twice: with the live weights, and
   inside ``with ema.average_parameters():``, which swaps the averages into the
   model and puts the live weights back afterwards.

The task (:mod:`paddle_llrd.models.synthetic`) is a majority vote over the tokens of
each sequence, which the model has to learn through attention from ``[CLS]``.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np
import paddle
from paddle import nn

from paddle_llrd import AdamWDL, ExponentialMovingAverage, LinearDecayWithWarmup, no_decay_parameter_names
from paddle_llrd.models.synthetic import make_majority_task
from paddle_llrd.models.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification


def build_optimizer(
    model: TinyBertForSequenceClassification,
    scheduler: paddle.optimizer.lr.LRScheduler,
    layerwise_decay: float,
) -> AdamWDL:
    """AdamWDL with layer-wise decay, no decay on biases and norms, clipping at norm 1."""
    name_dict = {param.name: name for name, param in model.named_parameters()}
    no_decay = no_decay_parameter_names(model)  # biases and norms, as PaddleNLP's Trainer
    return AdamWDL(
        learning_rate=scheduler,
        parameters=model.parameters(),
        weight_decay=0.01,
        apply_decay_param_fun=lambda param_name: param_name not in no_decay,
        grad_clip=nn.ClipGradByGlobalNorm(clip_norm=1.0),
        layerwise_decay=layerwise_decay,
        n_layers=model.config.num_hidden_layers,
        name_dict=name_dict,
    )


def accuracy(model: nn.Layer, input_ids: np.ndarray, labels: np.ndarray) -> float:
    model.eval()
    with paddle.no_grad():
        predicted = model(paddle.to_tensor(input_ids)).argmax(axis=-1).numpy()
    model.train()
    return float((predicted == labels).mean())


SEQ_LEN, VOCAB_SIZE, HELD_OUT = 16, 32, 512


def make_datasets(steps: int, batch_size: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """``(train_ids, train_labels, test_ids, test_labels)``: one fresh batch per step, 512 held out."""
    train_ids, train_labels = make_majority_task(steps * batch_size, seq_len=SEQ_LEN, vocab_size=VOCAB_SIZE, seed=seed)
    test_ids, test_labels = make_majority_task(HELD_OUT, seq_len=SEQ_LEN, vocab_size=VOCAB_SIZE, seed=seed + 1)
    return train_ids, train_labels, test_ids, test_labels


def train(
    steps: int = 300,
    batch_size: int = 32,
    learning_rate: float = 3e-3,
    layerwise_decay: float = 0.8,
    seed: int = 0,
    ema_decay: float = 0.99,
) -> dict:
    """Train; returns the per-step ``lrs`` and ``losses`` and the held-out accuracy
    before and after training, with the live weights and with their EMA."""
    paddle.seed(seed)
    config = TinyBertConfig(vocab_size=VOCAB_SIZE, max_position_embeddings=SEQ_LEN)
    model = TinyBertForSequenceClassification(config)
    train_ids, train_labels, test_ids, test_labels = make_datasets(steps, batch_size, seed)

    scheduler = LinearDecayWithWarmup(learning_rate, total_steps=steps, warmup=0.1)
    optimizer = build_optimizer(model, scheduler, layerwise_decay)
    ema = ExponentialMovingAverage(model, decay=ema_decay, warmup=True)
    ema.register()

    history = {"lrs": [], "losses": [], "accuracy_before": accuracy(model, test_ids, test_labels)}
    for step in range(steps):
        batch = slice(step * batch_size, (step + 1) * batch_size)
        logits = model(paddle.to_tensor(train_ids[batch]))
        loss = nn.functional.cross_entropy(logits, paddle.to_tensor(train_labels[batch]))
        loss.backward()
        history["lrs"].append(optimizer.get_lr())
        optimizer.step()
        optimizer.clear_grad()
        scheduler.step()
        ema.update()
        history["losses"].append(float(loss))
    history["accuracy_after"] = accuracy(model, test_ids, test_labels)
    with ema.average_parameters():
        history["accuracy_after_ema"] = accuracy(model, test_ids, test_labels)
    return history


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps (default 300)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (default 3e-3)")
    parser.add_argument("--layerwise-decay", type=float, default=0.8)
    parser.add_argument("--ema-decay", type=float, default=0.99, help="EMA decay of the weights (default 0.99)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1:
        parser.error("--steps and --batch-size must be >= 1")
    if not 0.0 <= args.ema_decay < 1.0:
        parser.error("--ema-decay must lie in [0, 1)")
    history = train(args.steps, args.batch_size, args.lr, args.layerwise_decay, ema_decay=args.ema_decay)
    every = max(1, args.steps // 10)
    for step in range(0, args.steps, every):
        window = history["losses"][step : step + every]
        print(f"step {step:4d}  lr {history['lrs'][step]:.2e}  loss {np.mean(window):.4f}")
    print(
        f"{args.steps} steps: loss {history['losses'][0]:.4f} -> {history['losses'][-1]:.4f}, "
        f"held-out accuracy {history['accuracy_before']:.3f} -> {history['accuracy_after']:.3f} "
        f"(EMA of the weights: {history['accuracy_after_ema']:.3f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
