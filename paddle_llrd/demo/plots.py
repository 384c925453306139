"""The demo's figures (PNG, via matplotlib's Agg backend).

* ``layer_change.png``: each layer's relative weight change from the
  pretrained weights, one bar per arm (mean over seeds, whiskers one sample
  standard deviation across seeds, as the figure says);
* ``transfer.png``: target accuracy against source accuracy kept, one point
  per seed and arm, the arm's mean as a large marker;
* ``layer_lrs.png``: each layer's effective learning rate over the steps of
  one AdamWDL run, over AdamW's single rate drawn as a wide grey band.

A ``demo --quick`` run's figures are headed :data:`SMOKE_RUN_TITLE`.
"""
from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from .experiment import FineTuneRun
from .metrics import mean_and_spread
from .report import arm_name, group_by_arm


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: The line a --quick run's figures open with, so that a figure seen alone does not pass for the demo's.
SMOKE_RUN_TITLE = "--quick smoke run: these numbers mean nothing"


def _save(fig, path: str, smoke_run: bool = False) -> str:
    if smoke_run:
        fig.suptitle(SMOKE_RUN_TITLE, color="tab:red", fontweight="bold")
    fig.tight_layout()
    # "tight" keeps a legend placed outside the axes inside the image
    fig.savefig(path, dpi=100, bbox_inches="tight")
    return path


def plot_layer_change(plt, runs: Sequence[FineTuneRun], path: str, smoke_run: bool = False) -> str:
    arms = list(group_by_arm(runs).values())
    labels = list(runs[0].layer_change)
    x = np.arange(len(labels))
    width = 0.8 / len(arms)
    fig, ax = plt.subplots(figsize=(7.5, 4))
    for i, arm in enumerate(arms):
        stats = [mean_and_spread([r.layer_change[label] for r in arm]) for label in labels]
        ax.bar(x + (i - (len(arms) - 1) / 2) * width, [m for m, _ in stats], width, yerr=[s for _, s in stats], capsize=2, label=arm_name(arm[0]))
    seeds = len(arms[0])
    ax.set_xticks(x, labels)
    ax.set_ylabel("||W - W_pretrained|| / ||W_pretrained||")
    ax.set_title("How far fine-tuning moved each layer\n"
                 f"bar: mean over {seeds} seeds, whiskers: \u00b11 standard deviation across seeds",
                 fontsize="medium")
    ax.legend()
    path = _save(fig, path, smoke_run)
    plt.close(fig)
    return path


def plot_transfer(plt, runs: Sequence[FineTuneRun], pretrained_source_accuracy: float, path: str, smoke_run: bool = False) -> str:
    fig, ax = plt.subplots(figsize=(6.5, 5))
    for index, arm in enumerate(group_by_arm(runs).values()):
        color = f"C{index}"
        targets = [r.target_accuracy for r in arm]
        kept = [r.source_accuracy_kept for r in arm]
        ax.scatter(targets, kept, color=color, alpha=0.6, label=f"{arm_name(arm[0])} (one point per seed)")
        ax.scatter([np.mean(targets)], [np.mean(kept)], color=color, marker="X", s=160, edgecolors="black")
    ax.axhline(pretrained_source_accuracy, color="grey", linestyle=":", label="source accuracy before fine-tuning")
    ax.set_xlabel("target accuracy (new digits, few labels)")
    ax.set_ylabel("source accuracy kept (old head, new backbone)")
    ax.set_title("Learning the new task vs keeping the old one (X = mean)")
    # below the axes: inside, it covered the seeds that keep least of the old task
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False)
    path = _save(fig, path, smoke_run)
    plt.close(fig)
    return path


def plot_layer_lrs(plt, layerwise: FineTuneRun, baseline: FineTuneRun | None, path: str, smoke_run: bool = False) -> str:
    fig, ax = plt.subplots(figsize=(7, 4))
    if baseline is not None and baseline.layer_lrs:
        # a wide light band under the layers' lines: the layers at ratio 1 (final norm, head)
        # run on it and stay visible instead of hiding under a dashed line on top
        ax.plot(next(iter(baseline.layer_lrs.values())), color="0.75", linewidth=6, solid_capstyle="butt",
                label="AdamW (every layer)", zorder=1)
    # layers with equal ratios (the final norm and the head, both at 1) share one line and one label
    curves: dict[tuple[float, ...], list[str]] = {}
    for label, lrs in layerwise.layer_lrs.items():
        curves.setdefault(tuple(lrs), []).append(label)
    for lrs, labels in curves.items():
        ax.plot(list(lrs), label=" = ".join(labels), zorder=2)
    ax.set_xlabel("fine-tuning step")
    ax.set_ylabel("effective learning rate")
    ax.set_title(f"{arm_name(layerwise)}: per-layer effective lr")
    ax.legend(fontsize="small")
    path = _save(fig, path, smoke_run)
    plt.close(fig)
    return path


def write_plots(runs: Sequence[FineTuneRun], pretrained_source_accuracy: float, output_dir: str,
                smoke_run: bool = False) -> list[str]:
    """Write the three figures into ``output_dir``; returns their paths (none without matplotlib).

    ``smoke_run`` (``demo --quick``) heads each figure with :data:`SMOKE_RUN_TITLE`.
    """
    plt = _pyplot()
    if plt is None:
        print("matplotlib is not installed: `pip install paddle_llrd[demo]` for the figures")
        return []
    paths = [
        plot_layer_change(plt, runs, os.path.join(output_dir, "layer_change.png"), smoke_run),
        plot_transfer(plt, runs, pretrained_source_accuracy, os.path.join(output_dir, "transfer.png"), smoke_run),
    ]
    layerwise = next((r for r in runs if r.optimizer == "AdamWDL" and r.layer_lrs), None)
    if layerwise is not None:
        baseline = next((r for r in runs if r.optimizer == "AdamW" and r.layer_lrs), None)
        paths.append(plot_layer_lrs(plt, layerwise, baseline, os.path.join(output_dir, "layer_lrs.png"), smoke_run))
    return paths
