"""The main job: ``python -m paddle_llrd demo`` (``make demo``).

Builds the small BERT of :mod:`paddle_llrd.tiny_bert` (random init, no
downloads) and fine-tunes it on the synthetic majority task
(``rule="upper"`` of :mod:`paddle_llrd.synthetic`) twice from the same
weights and data order: once with ``paddle.optimizer.AdamW`` and once with
:class:`paddle_llrd.AdamWDL` (layer-wise lr decay). With
``--pretrain-steps N`` both start instead from a checkpoint trained for ``N``
AdamW steps on the related ``rule="middle"`` task. Both runs use the same
warmup schedule from the registry, the same gradient clipping and an
:class:`paddle_llrd.ExponentialMovingAverage` of the weights, so the table
isolates the optimizer. It prints a side-by-side table and writes PNG plots
(loss curves; per-layer effective lr over steps) into ``--output-dir``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import dataclass, field

import numpy as np
import paddle

from . import AdamWDL, ExponentialMovingAverage, get_scheduler
from .layer_maps import no_decay_parameter_names
from .layerwise import layerwise_lr_decay
from .synthetic import make_majority_task
from .tiny_bert import TinyBertConfig, TinyBertForSequenceClassification


@dataclass
class RunResult:
    name: str
    losses: list = field(default_factory=list)
    step_times: list = field(default_factory=list)
    layer_lrs: dict = field(default_factory=dict)  # layer label -> [effective lr per step]
    eval_accuracy: float = 0.0
    ema_eval_accuracy: float = 0.0

    @property
    def final_train_loss(self) -> float:
        tail = self.losses[-max(1, len(self.losses) // 10):]
        return float(np.mean(tail))

    @property
    def median_step_ms(self) -> float:
        return 1000.0 * statistics.median(self.step_times)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m paddle_llrd demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=400, help="fine-tuning steps per run (default 400)")
    parser.add_argument("--pretrain-steps", type=int, default=0, help="AdamW steps on the related rule=\"middle\" task before fine-tuning (default 0: fine-tune from random init)")
    parser.add_argument("--layers", type=int, default=4, help="Transformer layers (default 4)")
    parser.add_argument("--hidden", type=int, default=64, help="hidden size (default 64)")
    parser.add_argument("--decay", type=float, default=0.8, help="layer-wise lr decay of AdamWDL (default 0.8)")
    parser.add_argument("--schedule", default="linear", help="registry name of the lr schedule (default linear)")
    parser.add_argument("--learning-rate", type=float, default=1e-3, help="peak learning rate (default 1e-3)")
    parser.add_argument("--warmup-ratio", type=float, default=0.1, help="warmup fraction of --steps (default 0.1)")
    parser.add_argument("--weight-decay", type=float, default=0.01, help="decoupled weight decay (default 0.01)")
    parser.add_argument("--ema-decay", type=float, default=0.99, help="EMA decay (default 0.99)")
    parser.add_argument("--batch-size", type=int, default=32, help="batch size (default 32)")
    parser.add_argument("--seed", type=int, default=42, help="seed for weights and data (default 42)")
    parser.add_argument("--output-dir", default="demo_output", help="folder for the plots and results.json")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return parser


SEQ_LEN = 16
VOCAB_SIZE = 64


def _layer_label(structured_name: str) -> str:
    if "encoder.layers." in structured_name:
        return "layer " + structured_name.split("encoder.layers.")[1].split(".")[0]
    if "embedding" in structured_name:
        return "embeddings"
    return "head"


def _evaluate(model, input_ids, labels, batch_size) -> float:
    model.eval()
    correct = 0
    with paddle.no_grad():
        for start in range(0, len(labels), batch_size):
            logits = model(paddle.to_tensor(input_ids[start:start + batch_size]))
            correct += int((logits.argmax(-1).numpy() == labels[start:start + batch_size]).sum())
    model.train()
    return correct / len(labels)


def build_model(args) -> TinyBertForSequenceClassification:
    paddle.seed(args.seed)
    config = TinyBertConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=4,
        intermediate_size=2 * args.hidden,
        max_position_embeddings=SEQ_LEN,
    )
    return TinyBertForSequenceClassification(config)


def pretrain(args, model) -> dict:
    """A short AdamW run on the related task; returns the checkpoint both fine-tunes start from."""
    ids, labels = make_majority_task(4096, seq_len=SEQ_LEN, vocab_size=VOCAB_SIZE, seed=args.seed + 2, rule="middle")
    optimizer = paddle.optimizer.AdamW(learning_rate=args.learning_rate, parameters=model.parameters())
    rng = np.random.default_rng(args.seed + 2)
    steps = range(args.pretrain_steps)
    if not args.no_progress:
        from tqdm import tqdm

        steps = tqdm(steps, desc="pretrain", unit="step")
    for _ in steps:
        batch = rng.integers(0, len(labels), size=args.batch_size)
        loss = paddle.nn.functional.cross_entropy(model(paddle.to_tensor(ids[batch])), paddle.to_tensor(labels[batch]))
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
    return {k: v.clone() for k, v in model.state_dict().items()}


def train_once(args, use_llrd: bool, data, initial_state: dict) -> RunResult:
    train_ids, train_labels, eval_ids, eval_labels = data
    model = build_model(args)
    model.set_state_dict(initial_state)
    scheduler = get_scheduler(
        args.schedule,
        learning_rate=args.learning_rate,
        num_warmup_steps=int(args.warmup_ratio * args.steps),
        num_training_steps=args.steps,
    )
    name_dict = {p.name: n for n, p in model.named_parameters()}
    no_decay = no_decay_parameter_names(model)
    common = dict(
        learning_rate=scheduler,
        parameters=model.parameters(),
        weight_decay=args.weight_decay,
        apply_decay_param_fun=lambda name: name not in no_decay,
        grad_clip=paddle.nn.ClipGradByGlobalNorm(1.0),
    )
    if use_llrd:
        optimizer = AdamWDL(layerwise_decay=args.decay, n_layers=args.layers, name_dict=name_dict, **common)
    else:
        optimizer = paddle.optimizer.AdamW(**common)
    ema = ExponentialMovingAverage(model, decay=args.ema_decay)
    ema.register()

    ratios = {}
    for structured, param in model.named_parameters():
        ratio = layerwise_lr_decay(args.decay, name_dict, args.layers, param) if use_llrd else 1.0
        ratios.setdefault(_layer_label(structured), ratio)
    result = RunResult(name="AdamWDL" if use_llrd else "AdamW", layer_lrs={k: [] for k in ratios})

    rng = np.random.default_rng(args.seed)
    loss_fn = paddle.nn.CrossEntropyLoss()
    steps = range(args.steps)
    if not args.no_progress:
        from tqdm import tqdm

        steps = tqdm(steps, desc=result.name, unit="step", leave=True)
    for _ in steps:
        batch = rng.integers(0, len(train_labels), size=args.batch_size)
        for label, ratio in ratios.items():
            result.layer_lrs[label].append(optimizer.get_lr() * ratio)
        start = time.perf_counter()
        loss = loss_fn(model(paddle.to_tensor(train_ids[batch])), paddle.to_tensor(train_labels[batch]))
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        scheduler.step()
        ema.update()
        result.step_times.append(time.perf_counter() - start)
        result.losses.append(float(loss))
        if hasattr(steps, "set_postfix"):
            steps.set_postfix(loss=f"{result.losses[-1]:.3f}", refresh=False)

    result.eval_accuracy = _evaluate(model, eval_ids, eval_labels, 256)
    with ema.average_parameters():
        result.ema_eval_accuracy = _evaluate(model, eval_ids, eval_labels, 256)
    return result


def format_table(results: list[RunResult]) -> str:
    rows = [
        ("final train loss", lambda r: f"{r.final_train_loss:.4f}"),
        ("eval accuracy", lambda r: f"{r.eval_accuracy:.3f}"),
        ("eval accuracy (EMA)", lambda r: f"{r.ema_eval_accuracy:.3f}"),
        ("median step time (ms)", lambda r: f"{r.median_step_ms:.1f}"),
    ]
    width = max(len(label) for label, _ in rows)
    header = " " * width + "".join(f"  {r.name:>10}" for r in results)
    lines = [header, "-" * len(header)]
    for label, fmt in rows:
        lines.append(f"{label:<{width}}" + "".join(f"  {fmt(r):>10}" for r in results))
    return "\n".join(lines)


def write_plots(results: list[RunResult], output_dir: str) -> list[str]:
    """Write ``loss_curves.png`` and ``layer_lrs.png``; returns their paths
    (empty when matplotlib is missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: `pip install paddle_llrd[plot]` for the plots")
        return []
    paths = []
    fig, ax = plt.subplots(figsize=(7, 4))
    for result in results:
        losses = np.asarray(result.losses)
        window = max(1, len(losses) // 50)
        smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
        ax.plot(smooth, label=result.name)
    ax.set_xlabel("step")
    ax.set_ylabel("train loss (moving average)")
    ax.set_title("Training loss")
    ax.legend()
    fig.tight_layout()
    paths.append(os.path.join(output_dir, "loss_curves.png"))
    fig.savefig(paths[-1], dpi=100)
    plt.close(fig)

    llrd = next(r for r in results if r.name == "AdamWDL")
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, lrs in llrd.layer_lrs.items():
        ax.plot(lrs, label=label)
    ax.set_xlabel("step")
    ax.set_ylabel("effective learning rate")
    ax.set_title("AdamWDL: per-layer effective lr")
    ax.legend(fontsize="small")
    fig.tight_layout()
    paths.append(os.path.join(output_dir, "layer_lrs.png"))
    fig.savefig(paths[-1], dpi=100)
    plt.close(fig)
    return paths


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.steps < 1:
        raise SystemExit("--steps must be >= 1")
    if args.layers < 1:
        raise SystemExit("--layers must be >= 1")
    if args.pretrain_steps < 0:
        raise SystemExit("--pretrain-steps must be >= 0")
    train_ids, train_labels = make_majority_task(4096, seq_len=SEQ_LEN, vocab_size=VOCAB_SIZE, seed=args.seed)
    eval_ids, eval_labels = make_majority_task(1024, seq_len=SEQ_LEN, vocab_size=VOCAB_SIZE, seed=args.seed + 1)
    data = (train_ids, train_labels, eval_ids, eval_labels)
    print(
        f"A {args.layers}-layer BERT-shaped model (hidden {args.hidden}): {args.pretrain_steps} pretraining steps, "
        f"then {args.steps} fine-tuning steps per optimizer, schedule {args.schedule!r}, layer decay {args.decay}"
    )
    model = build_model(args)
    initial_state = pretrain(args, model) if args.pretrain_steps else model.state_dict()
    results = [train_once(args, use_llrd, data, initial_state) for use_llrd in (False, True)]
    print()
    print(format_table(results))
    os.makedirs(args.output_dir, exist_ok=True)
    summary = {
        r.name: {
            "final_train_loss": r.final_train_loss,
            "eval_accuracy": r.eval_accuracy,
            "ema_eval_accuracy": r.ema_eval_accuracy,
            "median_step_ms": r.median_step_ms,
        }
        for r in results
    }
    with open(os.path.join(args.output_dir, "results.json"), "w") as handle:
        json.dump({"args": vars(args), "results": summary}, handle, indent=2)
    paths = write_plots(results, args.output_dir)
    print(f"\nwrote {', '.join(paths + [os.path.join(args.output_dir, 'results.json')])}")
    return 0
