"""The demo's printed tables and its ``results.json``.

Runs are grouped by *arm*: the optimizer with its layer decay and learning
rate. An arm's numbers are means and sample standard deviations over seeds.

Example:
    >>> from paddle_llrd.demo.experiment import FineTuneRun
    >>> runs = [FineTuneRun("AdamW", 1.0, 1e-3, seed, acc, kept, {"block 0": change}, 0.1)
    ...         for seed, acc, kept, change in [(0, 0.8, 0.5, 0.2), (1, 0.9, 0.7, 0.4)]]
    >>> print(transfer_table(runs))
    optimizer  decay  target accuracy  source accuracy kept
    -------------------------------------------------------
    AdamW       1.00    0.850 ± 0.071         0.600 ± 0.141
    >>> print(layer_change_table(runs))
                      AdamW
    -----------------------
    block 0           0.300
"""
from __future__ import annotations

import json
from collections.abc import Sequence

from .experiment import FineTuneRun
from .metrics import mean_and_spread

RESULTS_FILE = "results.json"


def arm_label(optimizer: str, layerwise_decay: float) -> str:
    return optimizer if optimizer == "AdamW" else f"{optimizer} {layerwise_decay:g}"


def arm_name(run: FineTuneRun) -> str:
    return arm_label(run.optimizer, run.layerwise_decay)


def group_by_arm(runs: Sequence[FineTuneRun]) -> dict[tuple[str, float, float], list[FineTuneRun]]:
    """Runs keyed by ``(optimizer, layerwise_decay, learning_rate)``, in first-seen order."""
    arms: dict[tuple[str, float, float], list[FineTuneRun]] = {}
    for run in runs:
        arms.setdefault((run.optimizer, run.layerwise_decay, run.learning_rate), []).append(run)
    return arms


def _mean_spread(values: list[float]) -> str:
    mean, spread = mean_and_spread(values)
    return f"{mean:.3f} ± {spread:.3f}"


def transfer_table(runs: Sequence[FineTuneRun]) -> str:
    """One row per arm: target accuracy and source accuracy kept, mean ± std over seeds."""
    header = f"{'optimizer':<9}  {'decay':>5}  {'target accuracy':>15}  {'source accuracy kept':>20}"
    lines = [header, "-" * len(header)]
    for (optimizer, decay, _), arm in group_by_arm(runs).items():
        lines.append(
            f"{optimizer:<9}  {decay:>5.2f}  {_mean_spread([r.target_accuracy for r in arm]):>15}"
            f"  {_mean_spread([r.source_accuracy_kept for r in arm]):>20}"
        )
    return "\n".join(lines)


def layer_change_table(runs: Sequence[FineTuneRun]) -> str:
    """Relative weight change from the pretrained weights per layer (rows) and arm (columns), mean over seeds."""
    arms = group_by_arm(runs)
    names = [arm_name(arm[0]) for arm in arms.values()]
    labels = list(runs[0].layer_change)
    width = max(len(label) for label in labels) + 2
    header = " " * width + "".join(f"  {name:>12}" for name in names)
    lines = [header, "-" * len(header)]
    for label in labels:
        means = [mean_and_spread([r.layer_change[label] for r in arm])[0] for arm in arms.values()]
        lines.append(f"{label:<{width}}" + "".join(f"  {mean:>12.3f}" for mean in means))
    return "\n".join(lines)


def grid_table(runs: Sequence[FineTuneRun]) -> str:
    """Mean target accuracy / source accuracy kept for each learning rate (rows) and optimizer (columns)."""
    arms = group_by_arm(runs)
    columns = list(dict.fromkeys((optimizer, decay) for optimizer, decay, _ in arms))
    rates = sorted({rate for _, _, rate in arms})
    header = f"{'lr':>8}" + "".join(f"  {arm_label(optimizer, decay):>13}" for optimizer, decay in columns)
    lines = ["target accuracy / source accuracy kept, mean over seeds", header, "-" * len(header)]
    for rate in rates:
        cells = []
        for optimizer, decay in columns:
            arm = arms.get((optimizer, decay, rate))
            if arm is None:
                cells.append(f"{'-':>13}")
                continue
            target = mean_and_spread([r.target_accuracy for r in arm])[0]
            kept = mean_and_spread([r.source_accuracy_kept for r in arm])[0]
            cells.append(f"{target:.3f} / {kept:.3f}")
        lines.append(f"{rate:>8g}" + "".join(f"  {cell:>13}" for cell in cells))
    return "\n".join(lines)


def results_document(dataset: str, seeds: Sequence[int], runs: Sequence[FineTuneRun], run_extras: dict) -> dict:
    """The content of ``results.json``: exactly ``dataset``, ``seeds`` and ``runs`` at the top level.

    ``run_extras`` (the experiment's settings) is merged into every run, so a
    run read alone says what produced it.
    """
    return {"dataset": dataset, "seeds": list(seeds), "runs": [{**run.to_json(), **run_extras} for run in runs]}


def write_results(path: str, document: dict) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=2)
        handle.write("\n")
