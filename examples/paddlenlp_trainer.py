"""Fine-tune a BERT classifier with PaddleNLP's Trainer and layer-wise lr decay.

Switching a PaddleNLP ``Trainer`` script to paddle_llrd's optimizer and
schedules takes two edits::

    from paddle_llrd.integrations.paddlenlp import LLRDTrainer   # was: Trainer
    trainer = LLRDTrainer(model=model, args=training_args, ...,
                          layerwise_decay=0.8)                   # new keyword

Everything else (``TrainingArguments``, data, ``compute_metrics``,
checkpoints) stays as it was. This example builds a small BERT from a config
(random initialisation, no downloads) and a synthetic task: is token 1 or token
2 in the sequence? With a real checkpoint you would write
``BertForSequenceClassification.from_pretrained("bert-base-uncased",
num_classes=2)`` and tokenize real text instead.

Run it in an environment with PaddleNLP (see ``requirements-paddlenlp.txt``)::

    pip install -r requirements-paddlenlp.txt -e .
    python examples/paddlenlp_trainer.py                  # about 30 s on 2 CPU cores
    python examples/paddlenlp_trainer.py --short          # a few steps (the tests' mode)
    python examples/paddlenlp_trainer.py --lr-scheduler-type cosine --layerwise-decay 0.65
    python examples/paddlenlp_trainer.py --output-dir out --save-steps 100    # checkpoints in out/
    python examples/paddlenlp_trainer.py --output-dir out --resume-from-checkpoint out/checkpoint-100

A run resumes from ``--resume-from-checkpoint`` or, without it, from the last
checkpoint in ``--output-dir`` (PaddleNLP's ``Trainer.train()`` does not read
``resume_from_checkpoint`` from the arguments, so the script passes it). The
logs (and VisualDL, PaddleNLP's default ``report_to``, under
``<output-dir>/runs``) show each layer group's learning rate, e.g.
``learning_rate/layer_0``, and the gradient norms.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from typing import Dict, List, Optional, Sequence

import numpy as np


def synthetic_examples(n_examples: int, seq_len: int, vocab_size: int, seed: int) -> List[dict]:
    """Random token sequences holding token 1 (label 1) or token 2 (label 0)."""
    rng = np.random.default_rng(seed)
    examples = []
    for i in range(n_examples):
        label = i % 2
        ids = rng.integers(3, vocab_size, seq_len)
        ids[rng.integers(0, seq_len)] = 1 if label else 2
        examples.append({"input_ids": ids.tolist(), "labels": label})
    return examples


def accuracy(eval_prediction) -> Dict[str, float]:
    predictions = np.asarray(eval_prediction.predictions).argmax(axis=-1)
    return {"accuracy": float(np.mean(predictions == np.asarray(eval_prediction.label_ids)))}


def layer_group(structured_name: str) -> str:
    """Which row of the learning-rate table a parameter belongs to."""
    layer = re.search(r"encoder\.layers\.(\d+)\.", structured_name)
    if layer:
        return f"encoder layer {layer.group(1)}"
    if "embedding" in structured_name:
        return "embeddings"
    return "pooler + classifier"


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps (default 300)")
    parser.add_argument("--layers", type=int, default=4, help="encoder layers (default 4)")
    parser.add_argument("--layerwise-decay", type=float, default=0.8, help="per-layer lr decay (default 0.8)")
    parser.add_argument(
        "--lr-scheduler-type", default="linear", help="any name in paddle_llrd's registry (default linear)"
    )
    parser.add_argument("--learning-rate", type=float, default=2e-3, help="peak learning rate (default 2e-3)")
    parser.add_argument("--warmup-ratio", type=float, default=0.1, help="warmup fraction (default 0.1)")
    parser.add_argument("--weight-decay", type=float, default=0.01, help="decoupled weight decay (default 0.01)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--output-dir", default=None, help="Trainer output folder (default: a temporary one)")
    parser.add_argument("--save-steps", type=int, default=0, help="save a checkpoint every N steps (default 0: none)")
    parser.add_argument("--resume-from-checkpoint", default=None,
                        help="a checkpoint folder to resume from (default: the last one in --output-dir)")
    parser.add_argument("--short", action="store_true", help="a few steps on little data, for a quick check")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, object]:
    """Train, evaluate and print the per-layer learning rates; returns the
    metrics (``train_loss``, ``eval_accuracy``, ``start_step`` (0, or the
    resumed checkpoint's step), ``learning_rates`` logged per
    step, ``layer_ratios``)."""
    options = parse_args(argv)
    if options.short:
        options.steps = min(options.steps, 8)

    # Imported here so that --help works without PaddleNLP installed.
    import paddle
    from paddlenlp.trainer import TrainerCallback
    from paddlenlp.transformers import BertConfig, BertForSequenceClassification

    from paddle_llrd import layerwise_lr_decay
    from paddle_llrd.integrations.paddlenlp import LLRDTrainer, LLRDTrainingArguments, get_last_checkpoint

    paddle.seed(options.seed)
    vocab_size, seq_len = 64, 16
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        num_hidden_layers=options.layers,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=seq_len,
        num_labels=2,
    )
    model = BertForSequenceClassification(config)
    n_train, n_eval = (64, 32) if options.short else (2048, 256)
    train_data = synthetic_examples(n_train, seq_len, vocab_size, seed=options.seed)
    eval_data = synthetic_examples(n_eval, seq_len, vocab_size, seed=options.seed + 1)

    output_dir = options.output_dir or tempfile.mkdtemp(prefix="paddlenlp_trainer_")
    training_args = LLRDTrainingArguments(
        output_dir=output_dir,
        max_steps=options.steps,
        per_device_train_batch_size=32,
        per_device_eval_batch_size=64,
        learning_rate=options.learning_rate,
        warmup_ratio=options.warmup_ratio,
        lr_scheduler_type=options.lr_scheduler_type,
        weight_decay=options.weight_decay,
        logging_steps=1 if options.short else 25,
        save_strategy="steps" if options.save_steps > 0 else "no",
        save_steps=max(options.save_steps, 1),
        disable_tqdm=options.short,
        seed=options.seed,
    )
    class StartingStep(TrainerCallback):
        """The global step training starts from (0, or a resumed checkpoint's)."""

        step = 0

        def on_train_begin(self, args, state, control, **kwargs):
            self.step = state.global_step

    starting_step = StartingStep()
    trainer = LLRDTrainer(
        model=model,
        args=training_args,
        train_dataset=train_data,
        eval_dataset=eval_data,
        compute_metrics=accuracy,
        layerwise_decay=options.layerwise_decay,
        callbacks=[starting_step],
    )
    # PaddleNLP's Trainer.train() does not read args.resume_from_checkpoint: pass it, or the last checkpoint
    # (the newest complete one: paddle_llrd's get_last_checkpoint skips a save that did not finish)
    last_checkpoint = get_last_checkpoint(output_dir) if os.path.isdir(output_dir) else None
    train_output = trainer.train(resume_from_checkpoint=options.resume_from_checkpoint or last_checkpoint)
    eval_metrics = trainer.evaluate()

    name_dict = {param.name: name for name, param in model.named_parameters()}
    layer_ratios: Dict[str, float] = {}
    for name, param in model.named_parameters():
        ratio = layerwise_lr_decay(options.layerwise_decay, name_dict, trainer.n_layers, param)
        layer_ratios.setdefault(layer_group(name), ratio)
    print(f"\nPeak learning rate {options.learning_rate:g}, layer-wise decay {options.layerwise_decay:g}:")
    print(f"{'parameters':<22}{'ratio':>10}{'peak lr':>14}")
    for group, ratio in sorted(layer_ratios.items(), key=lambda item: item[1]):
        print(f"{group:<22}{ratio:>10.4f}{options.learning_rate * ratio:>14.3e}")
    print(f"\nfinal train loss {train_output.training_loss:.4f}, eval accuracy {eval_metrics['eval_accuracy']:.3f}")

    learning_rates = [record["learning_rate"] for record in trainer.state.log_history if "learning_rate" in record]
    return {
        "train_loss": train_output.training_loss,
        "eval_accuracy": eval_metrics["eval_accuracy"],
        "learning_rates": learning_rates,
        "start_step": starting_step.step,
        "layer_ratios": layer_ratios,
    }


if __name__ == "__main__":
    main(sys.argv[1:])
