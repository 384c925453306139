"""Train a small LLaMA with PaddleFormers' Trainer, driven by a config file.

PaddleFormers dropped ``AdamWDL``, ``layerwise_lr_decay``, the EMA and the
warmup schedules that PaddleNLP had. With paddle_llrd a PaddleFormers script
gets them back by swapping two classes::

    from paddle_llrd.integrations.paddleformers import LLRDTrainer, LLRDTrainingArguments
    parser = PdArgumentParser((ModelArguments, LLRDTrainingArguments))  # was: TrainingArguments
    trainer = LLRDTrainer(model=model, args=training_args, ...)         # was: Trainer

and then everything is a field of the config file or the command line, as in
PaddleFormers' own fine-tuning scripts: ``layerwise_decay``, ``layer_map``,
``lr_scheduler_type`` (any name of paddle_llrd's registry) with
``lr_scheduler_kwargs``, ``min_lr``, ``weight_decay_end`` with
``weight_decay_incr_style``, and ``ema_decay`` with ``ema_warmup``.

This example builds the model from a config (random initialisation, no
downloads) and trains it on generated counting sequences; with a real
checkpoint you would call ``LlamaForCausalLM.from_pretrained(...)`` and
tokenize real text instead. ``--model_type ernie4_5`` trains an ERNIE 4.5
model of the same size. Run it in an environment with PaddleFormers (see
``requirements-paddleformers.txt``)::

    pip install -r requirements-paddleformers.txt -e .
    python examples/paddleformers_llama.py --output_dir out          # ~1 min on 2 CPU cores
    python examples/paddleformers_llama.py --output_dir out --short  # a few steps (the tests' mode)
    python examples/paddleformers_llama.py config.json               # or config.yaml; flags after it win
    python examples/paddleformers_llama.py --output_dir out --save_strategy steps --save_steps 50
    python examples/paddleformers_llama.py --output_dir out --resume_from_checkpoint out/checkpoint-50
    python examples/paddleformers_llama.py --output_dir out --layerwise_decay 0.65 \\
        --lr_scheduler_type cosine_with_min_lr --lr_scheduler_kwargs '{"min_lr_rate": 0.1}'

A config file holds the same names as the flags, e.g.::

    {"output_dir": "out", "layerwise_decay": 0.8, "layer_map": "llama",
     "lr_scheduler_type": "warmup_stable_decay",
     "lr_scheduler_kwargs": {"decay_ratio": 0.2, "decay_style": "linear"},
     "weight_decay": 0.01, "weight_decay_end": 0.1, "weight_decay_incr_style": "cosine",
     "ema_decay": 0.99, "ema_warmup": true}

Settings come in this order, each overriding the one before: the example's
defaults (``EXAMPLE_DEFAULTS``), the config file, ``--short`` (which only
shortens the run: ``SHORT_RUN``), then the other command-line flags.

A run resumes from ``--resume_from_checkpoint`` or, without it, from the last
checkpoint in ``output_dir`` (as PaddleFormers' own scripts do: its
``Trainer.train()`` does not read ``resume_from_checkpoint`` from the
arguments); ``--overwrite_output_dir`` starts afresh. The logs (and VisualDL,
PaddleFormers' default ``report_to``, under ``output_dir/runs``) show each
layer group's learning rate (``learning_rate/layer_0``, ...), the weight decay
and the gradient norms.
"""
# No `from __future__ import annotations`: PdArgumentParser reads the dataclass
# fields' types at run time.
import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

#: What this example sets unless the config file or command line does.
EXAMPLE_DEFAULTS: Dict[str, Any] = {
    "max_steps": 200,
    "per_device_train_batch_size": 16,
    "per_device_eval_batch_size": 16,
    "learning_rate": 3e-3,
    "warmup_ratio": 0.1,
    "lr_scheduler_type": "warmup_stable_decay",
    "layerwise_decay": 0.8,
    "weight_decay": 0.01,
    "weight_decay_end": 0.1,
    "weight_decay_incr_style": "cosine",
    "ema_decay": 0.99,
    "ema_warmup": True,  # timm's warm-up: the average fits a short run too
    "logging_steps": 20,
    "save_strategy": "no",
    "seed": 42,
}
#: ``--short``: a few steps on little data, for a quick check (the tests' mode).
SHORT_RUN: Dict[str, Any] = {"max_steps": 20, "logging_steps": 1, "disable_tqdm": True}
SEQ_LEN = 32


@dataclass
class ExampleArguments:
    """The model and data of this example (the Trainer's settings are LLRDTrainingArguments)."""

    model_type: str = field(default="llama", metadata={"help": "llama or ernie4_5"})
    num_hidden_layers: int = field(default=4, metadata={"help": "decoder blocks L"})
    hidden_size: int = field(default=64, metadata={"help": "model width"})
    vocab_size: int = field(default=128, metadata={"help": "tokens in the generated sequences"})
    short: bool = field(default=False, metadata={"help": "a few steps on little data (the tests' mode)"})


def as_flags(settings: Dict[str, Any]) -> List[str]:
    """``{"a": 1, "b": {...}}`` as ``["--a", "1", "--b", "<json>"]``, the way PdArgumentParser reads a config file."""
    flags: List[str] = []
    for key, value in settings.items():
        flags.append(f"--{key}")
        if isinstance(value, (list, tuple)):
            flags.extend(str(item) for item in value)
        else:
            flags.append(json.dumps(value) if isinstance(value, dict) else str(value))
    return flags


def parse(argv: Sequence[str]):
    """``(ExampleArguments, LLRDTrainingArguments)`` from an optional config file and flags."""
    from paddleformers.trainer import PdArgumentParser
    from paddleformers.trainer.argparser import strtobool

    from paddle_llrd.integrations.paddleformers import LLRDTrainingArguments

    parser = PdArgumentParser((ExampleArguments, LLRDTrainingArguments), description=__doc__.split("\n")[0])
    argv = list(argv)
    file_flags: List[str] = []
    if argv and argv[0].endswith((".json", ".yaml", ".yml")):
        config = argv.pop(0)
        file_flags = parser.read_json(config) if config.endswith(".json") else parser.read_yaml(config)
    # --short changes other fields' defaults, so it is read before the rest (with ExampleArguments' own rule).
    short_reader = argparse.ArgumentParser(add_help=False)
    short_reader.add_argument("--short", type=strtobool, nargs="?", const=True, default=False)
    short_flags = as_flags(SHORT_RUN) if short_reader.parse_known_args(file_flags + argv)[0].short else []
    flags = as_flags(EXAMPLE_DEFAULTS) + file_flags + short_flags + argv
    return parser.parse_args_into_dataclasses(flags, look_for_args_file=False)


def counting_sequences(n_sequences: int, vocab_size: int, seed: int) -> List[dict]:
    """Sequences that count up by a stride of 1-3 (mod the vocabulary): the next token is learnable."""
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, vocab_size, n_sequences)
    strides = rng.integers(1, 4, n_sequences)
    tokens = (starts[:, None] + strides[:, None] * np.arange(SEQ_LEN)) % vocab_size
    return [{"input_ids": row.tolist(), "labels": row.tolist()} for row in tokens]


def build_model(options: ExampleArguments):
    """A LLaMA (or ERNIE 4.5) causal LM from a config. ``fuse_rms_norm=False``:
    the fused RMSNorm kernel exists only on GPUs."""
    size = dict(
        vocab_size=options.vocab_size,
        hidden_size=options.hidden_size,
        intermediate_size=2 * options.hidden_size,
        num_hidden_layers=options.num_hidden_layers,
        num_attention_heads=4,
        max_position_embeddings=SEQ_LEN,
        fuse_rms_norm=False,
    )
    if options.model_type == "llama":
        from paddleformers.transformers import LlamaConfig, LlamaForCausalLM

        return LlamaForCausalLM(LlamaConfig(**size))
    if options.model_type == "ernie4_5":
        from paddleformers.transformers.ernie4_5.configuration import Ernie4_5Config
        from paddleformers.transformers.ernie4_5.modeling import Ernie4_5ForCausalLM

        # ERNIE 4.5 leaves num_key_value_heads unset (its attention then fails) and head_dim at 128.
        heads = size["num_attention_heads"]
        config = Ernie4_5Config(num_key_value_heads=heads, head_dim=options.hidden_size // heads, **size)
        return Ernie4_5ForCausalLM(config)
    raise ValueError(f"model_type must be 'llama' or 'ernie4_5', got {options.model_type!r}")


def step_recorder():
    """A callback keeping the learning rate and weight decay each optimizer step uses."""
    from paddleformers.trainer import TrainerCallback

    class StepRecorder(TrainerCallback):
        def __init__(self):
            self.learning_rates: List[float] = []
            self.weight_decays: List[float] = []

        def on_optimizer_begin(self, args, state, control, optimizer=None, **kwargs):
            schedule = getattr(optimizer, "weight_decay_schedule", None)
            self.learning_rates.append(float(optimizer.get_lr()))
            self.weight_decays.append(float(schedule()) if schedule is not None else float(args.weight_decay))

    return StepRecorder()


def layer_groups(trainer, model) -> Dict[str, float]:
    """Each row of the learning-rate table and its ratio of the schedule's lr."""
    tied = getattr(model.config, "tie_word_embeddings", False)
    groups: Dict[str, float] = {}
    for name, _ in model.named_parameters():
        block = trainer.layer_map.block_index(name)
        if block is not None:
            group = f"block {block}"
        elif "embed" in name:
            group = "embeddings + tied head" if tied else "embeddings"
        else:
            group = "final norm + head" if not tied else "final norm"
        groups.setdefault(group, trainer.layer_map.ratio(name, trainer.layerwise_decay))
    return groups


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Train (resuming as above), evaluate, save, print the per-layer learning
    rates; returns ``learning_rates`` and ``weight_decays`` (one per optimizer
    step this run took), ``layer_ratios``, ``train_loss``, ``eval_loss``,
    ``eval_ema_loss`` (None without an EMA), ``ema_updates`` and the parsed
    ``training_args``."""
    options, training_args = parse(sys.argv[1:] if argv is None else argv)

    import paddle

    from paddle_llrd.integrations.paddleformers import LLRDTrainer, get_last_checkpoint

    paddle.seed(training_args.seed)
    model = build_model(options)
    n_train, n_eval = (64, 16) if options.short else (4096, 256)
    recorder = step_recorder()
    trainer = LLRDTrainer(
        model=model,
        args=training_args,
        train_dataset=counting_sequences(n_train, options.vocab_size, seed=training_args.seed),
        eval_dataset=counting_sequences(n_eval, options.vocab_size, seed=training_args.seed + 1),
        callbacks=[recorder],
    )
    # PaddleFormers' Trainer.train() ignores args.resume_from_checkpoint: pass it, or the last checkpoint
    # (the newest complete one: paddle_llrd's get_last_checkpoint skips a save that did not finish)
    last_checkpoint = None
    if os.path.isdir(training_args.output_dir) and not training_args.overwrite_output_dir:
        last_checkpoint = get_last_checkpoint(training_args.output_dir)
    train_output = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint or last_checkpoint)
    eval_metrics = trainer.evaluate()  # eval_loss; with an EMA and ema_eval also eval_ema_loss (averaged weights)
    trainer.save_model()  # the trained weights, and with an EMA the averaged ones in <output_dir>/ema

    ratios = layer_groups(trainer, model)
    peak = training_args.learning_rate
    print(f"\n{options.model_type}, L={trainer.n_layers}, layerwise_decay={trainer.layerwise_decay:g}, "
          f"schedule {training_args.lr_scheduler_type}, peak lr {peak:g}:")
    print(f"{'parameters':<26}{'ratio':>10}{'peak lr':>14}")
    for group, ratio in sorted(ratios.items(), key=lambda item: item[1]):
        print(f"{group:<26}{ratio:>10.4f}{peak * ratio:>14.3e}")
    print(f"weight decay {recorder.weight_decays[0]:g} -> {recorder.weight_decays[-1]:g} "
          f"({training_args.weight_decay_incr_style})")
    ema_updates = trainer.ema.num_updates if trainer.ema is not None else 0
    averaged = f", of the EMA of {ema_updates} steps {eval_metrics['eval_ema_loss']:.4f}" if "eval_ema_loss" in eval_metrics else ""
    print(f"train loss {train_output.training_loss:.4f}, eval loss {eval_metrics['eval_loss']:.4f}{averaged}; "
          f"saved to {training_args.output_dir}")
    return {
        "learning_rates": recorder.learning_rates,
        "weight_decays": recorder.weight_decays,
        "layer_ratios": ratios,
        "train_loss": train_output.training_loss,
        "eval_loss": eval_metrics["eval_loss"],
        "eval_ema_loss": eval_metrics.get("eval_ema_loss"),
        "ema_updates": ema_updates,
        "training_args": training_args,
    }


if __name__ == "__main__":
    main()
