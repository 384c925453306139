"""Fine-tune a small BERT in dygraph with AdamWDL, a warmup schedule and gradient clipping.

Run::

    python examples/dygraph_finetune.py              # 300 steps, prints loss and accuracy
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

The task (:mod:`paddle_llrd.synthetic`) is a majority vote over the tokens of
each sequence, which the model has to learn through attention from ``[CLS]``.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np
import paddle
from paddle import nn

from paddle_llrd import AdamWDL, LinearDecayWithWarmup
from paddle_llrd.synthetic import make_majority_task
from paddle_llrd.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification


def build_optimizer(
    model: TinyBertForSequenceClassification,
    scheduler: paddle.optimizer.lr.LRScheduler,
    layerwise_decay: float,
) -> AdamWDL:
    """AdamWDL with layer-wise decay, no decay on biases and norms, clipping at norm 1."""
    name_dict = {param.name: name for name, param in model.named_parameters()}
    no_decay = {param.name for name, param in model.named_parameters() if "bias" in name or "norm" in name}
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


def train(
    steps: int = 300,
    batch_size: int = 32,
    learning_rate: float = 3e-3,
    layerwise_decay: float = 0.8,
    seed: int = 0,
) -> dict:
    """Train; returns the per-step ``lrs`` and ``losses`` and the held-out accuracy before/after."""
    paddle.seed(seed)
    config = TinyBertConfig(vocab_size=32, max_position_embeddings=16)
    model = TinyBertForSequenceClassification(config)
    train_ids, train_labels = make_majority_task(steps * batch_size, seq_len=16, vocab_size=32, seed=seed)
    test_ids, test_labels = make_majority_task(512, seq_len=16, vocab_size=32, seed=seed + 1)

    scheduler = LinearDecayWithWarmup(learning_rate, total_steps=steps, warmup=0.1)
    optimizer = build_optimizer(model, scheduler, layerwise_decay)

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
        history["losses"].append(float(loss))
    history["accuracy_after"] = accuracy(model, test_ids, test_labels)
    return history


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps (default 300)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (default 3e-3)")
    parser.add_argument("--layerwise-decay", type=float, default=0.8)
    args = parser.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1:
        parser.error("--steps and --batch-size must be >= 1")
    history = train(args.steps, args.batch_size, args.lr, args.layerwise_decay)
    every = max(1, args.steps // 10)
    for step in range(0, args.steps, every):
        window = history["losses"][step : step + every]
        print(f"step {step:4d}  lr {history['lrs'][step]:.2e}  loss {np.mean(window):.4f}")
    print(
        f"{args.steps} steps: loss {history['losses'][0]:.4f} -> {history['losses'][-1]:.4f}, "
        f"held-out accuracy {history['accuracy_before']:.3f} -> {history['accuracy_after']:.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
