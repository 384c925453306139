"""``python -m paddle_llrd demo``: flags, the run order, what is printed and written."""
from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

from paddle_llrd.demo import report
from paddle_llrd.demo.data import DATASET_NAME, few_shot_indices, load_transfer_task
from paddle_llrd.demo.experiment import FineTuneRun, Pretrained, TrainSettings, fine_tune, pretrain
from paddle_llrd.demo.plots import write_plots
from paddle_llrd.models.vit import TinyViTConfig

# The default run took 60 s of CPU time on 2 idle cores, 180 s on a busy machine (README.md); --quick is the
# test suite's few-second run.
DEFAULTS = dict(seeds=list(range(8)), decays=[0.75, 0.5], steps=100, pretrain_steps=400, layers=4, hidden=64)
QUICK = dict(seeds=[0, 1], decays=[0.5], steps=4, pretrain_steps=8, layers=2, hidden=16)
# Where the figures and results.json go: a quick run's beside, never over, the full run's.
OUTPUT_DIR, QUICK_OUTPUT_DIR = "demo_output", os.path.join("demo_output", "quick")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m paddle_llrd demo",
        description=(
            "Pretrain a small ViT on scikit-learn's digits 0-4, fine-tune it on digits 5-9 from a few labels per "
            "class with paddle.optimizer.AdamW and with AdamWDL, and compare what each learns and keeps."
        ),
    )
    add = parser.add_argument
    add("--seeds", type=int, nargs="+", help=f"fine-tuning seeds: few-shot images, new head, batch order (default {' '.join(map(str, DEFAULTS['seeds']))})")
    add("--labels-per-class", type=int, default=10, help="labelled target images per class (default 10)")
    add("--decays", type=float, nargs="+", help=f"AdamWDL layer decays to compare with AdamW (default {' '.join(map(str, DEFAULTS['decays']))})")
    add("--steps", type=int, help=f"fine-tuning steps per run (default {DEFAULTS['steps']})")
    add("--learning-rate", type=float, default=1e-3, help="fine-tuning peak learning rate (default 1e-3)")
    add("--grid-learning-rates", type=float, nargs="*", default=[], help="also run every decay (and AdamW) at these peak learning rates and print a lr x decay table (default: none)")
    add("--batch-size", type=int, default=32, help="fine-tuning batch size (default 32)")
    add("--schedule", default="linear", help="registry name of the lr schedule of every run (default linear)")
    add("--warmup-ratio", type=float, default=0.1, help="warmup fraction of each run's steps (default 0.1)")
    add("--weight-decay", type=float, default=0.05, help="decoupled weight decay, not on biases and norms (default 0.05)")
    add("--pretrain-steps", type=int, help=f"AdamW steps on the source digits (default {DEFAULTS['pretrain_steps']})")
    add("--pretrain-learning-rate", type=float, default=2e-3, help="pretraining peak learning rate (default 2e-3)")
    add("--layers", type=int, help=f"Transformer blocks (default {DEFAULTS['layers']})")
    add("--hidden", type=int, help=f"hidden size, a multiple of 4 (default {DEFAULTS['hidden']})")
    add("--quick", action="store_true", help=f"a few-second smoke run for tests, whose numbers mean nothing (unless given: {', '.join(f'{k}={v}' for k, v in QUICK.items())}; output in {QUICK_OUTPUT_DIR})")
    add("--output-dir", help=f"folder for the figures and results.json (default {OUTPUT_DIR}, {QUICK_OUTPUT_DIR} with --quick)")
    add("--no-progress", action="store_true", help="hide the progress bars")
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    for name, default in (QUICK if args.quick else DEFAULTS).items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    if args.output_dir is None:
        args.output_dir = QUICK_OUTPUT_DIR if args.quick else OUTPUT_DIR
    for name in ("steps", "pretrain_steps", "layers", "labels_per_class", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.hidden < 4 or args.hidden % 4:
        parser.error(f"--hidden must be a positive multiple of 4 (4 attention heads), got {args.hidden}")
    if len(set(args.seeds)) != len(args.seeds) or min(args.seeds) < 0:
        parser.error(f"--seeds must be distinct non-negative ints, got {args.seeds}")
    if any(not 0.0 < d <= 1.0 for d in args.decays):
        parser.error(f"--decays must lie in (0, 1], got {args.decays}")
    for flag, values in (
        ("--learning-rate", [args.learning_rate]),
        ("--pretrain-learning-rate", [args.pretrain_learning_rate]),
        ("--grid-learning-rates", args.grid_learning_rates),
    ):
        if any(not 0.0 < value < math.inf for value in values):  # written so that NaN fails too
            parser.error(f"{flag} must be finite and > 0, got {' '.join(map(str, values))}")
    if not 0.0 <= args.warmup_ratio <= 1.0:
        parser.error(f"--warmup-ratio must lie in [0, 1], got {args.warmup_ratio}")
    if not 0.0 <= args.weight_decay < math.inf:
        parser.error(f"--weight-decay must be finite and >= 0, got {args.weight_decay}")
    return args


def _progress_bar(args, total: int, desc: str, unit: str):
    """A tqdm bar, or None with --no-progress."""
    if args.no_progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit)


def _digit_range(digits: tuple[int, ...]) -> str:
    return f"{digits[0]}-{digits[-1]}" if list(digits) == list(range(digits[0], digits[-1] + 1)) else ",".join(map(str, digits))


def _pretrain(args, task) -> Pretrained:
    config = TinyViTConfig(
        image_size=8, patch_size=4, hidden_size=args.hidden, num_layers=args.layers, num_heads=4, num_classes=len(task.source_digits)
    )
    # Only pretraining shifts its images (by up to a pixel): augmentation for the model that all runs start from.
    settings = TrainSettings(
        args.pretrain_steps, args.pretrain_learning_rate, batch_size=64, warmup_ratio=args.warmup_ratio,
        schedule=args.schedule, weight_decay=args.weight_decay, max_shift=1,
    )
    bar = _progress_bar(args, args.pretrain_steps, "pretrain", "step")
    pretrained = pretrain(task, config, settings, seed=0, on_step=bar and (lambda _: bar.update()))
    if bar:
        bar.close()
    return pretrained


def _fine_tune_all(args, task, pretrained: Pretrained, few_shot: dict) -> list[FineTuneRun]:
    """Every seed x learning rate x optimizer; the effective lrs are recorded for the first seed at the main lr."""
    rates = [args.learning_rate] + [r for r in args.grid_learning_rates if r != args.learning_rate]
    work = [(seed, rate, decay) for seed in args.seeds for rate in rates for decay in [None, *args.decays]]
    bar = _progress_bar(args, len(work), "fine-tune", "run")
    runs = []
    for seed, rate, decay in work:
        settings = TrainSettings(
            args.steps, rate, args.batch_size, warmup_ratio=args.warmup_ratio, schedule=args.schedule, weight_decay=args.weight_decay
        )
        record_lrs = seed == args.seeds[0] and rate == args.learning_rate
        runs.append(fine_tune(pretrained, task, few_shot[seed], settings, decay, seed, record_lrs=record_lrs))
        if bar:
            bar.update()
    if bar:
        bar.close()
    return runs


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started, cpu_started = time.perf_counter(), time.process_time()
    task = load_transfer_task()
    try:
        few_shot = {seed: few_shot_indices(task.target_pool.labels, args.labels_per_class, np.random.default_rng((seed, 0))) for seed in args.seeds}
    except ValueError as error:
        raise SystemExit(f"--labels-per-class: {error}") from None
    source, target = _digit_range(task.source_digits), _digit_range(task.target_digits)
    smoke = "--quick: a smoke run of a few steps, whose numbers mean nothing (make demo runs the real one)"
    if args.quick:
        print(smoke)
    print(
        f"{DATASET_NAME}: pretrain a {args.layers}-block ViT (hidden {args.hidden}, 4x4-pixel patches) on digits {source}"
        f" ({len(task.source_train)} images, {args.pretrain_steps} AdamW steps),\nthen fine-tune it on digits {target} from"
        f" {args.labels_per_class} labelled images per class ({args.steps} steps, lr {args.learning_rate:g}, schedule"
        f" {args.schedule!r}) with each optimizer, seeds {args.seeds}"
    )
    pretrained = _pretrain(args, task)
    print(f"pretrained: source test accuracy {pretrained.source_test_accuracy:.3f} ({len(task.source_test)} images)")
    runs = _fine_tune_all(args, task, pretrained, few_shot)

    main_runs = [r for r in runs if r.learning_rate == args.learning_rate]
    print(f"\nfine-tuned on digits {target}, {len(args.seeds)} seeds (mean ± std), lr {args.learning_rate:g}:")
    print(report.transfer_table(main_runs))
    print("\nrelative weight change from the pretrained weights, ||W - W0|| / ||W0|| (mean over seeds):")
    print(report.layer_change_table(main_runs))
    if args.grid_learning_rates:
        print()
        print(report.grid_table(runs))

    os.makedirs(args.output_dir, exist_ok=True)
    extras = {
        "source_digits": list(task.source_digits),
        "target_digits": list(task.target_digits),
        "labels_per_class": args.labels_per_class,
        "pretrained_source_accuracy": pretrained.source_test_accuracy,
        "fine_tune_steps": args.steps,
        "schedule": args.schedule,
        "quick": args.quick,  # a smoke run's numbers, read alone, must not pass for the demo's
    }
    results_path = os.path.join(args.output_dir, report.RESULTS_FILE)
    report.write_results(results_path, report.results_document(DATASET_NAME, args.seeds, runs, extras))
    paths = write_plots(main_runs, pretrained.source_test_accuracy, args.output_dir, smoke_run=args.quick)
    print(f"\nwrote {', '.join(paths + [results_path])}" + (f"\n{smoke}" if args.quick else ""))
    print(f"({time.perf_counter() - started:.0f} s, {time.process_time() - cpu_started:.0f} s of CPU time in this process)")
    return 0
