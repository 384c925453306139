"""``make bench``: every benchmark in one run, ratios against
``paddle.optimizer.AdamW`` measured in the same process.

Writes ``docs/_static/benchmarks.json`` and ``docs/_static/benchmarks.png``
(the figure on the docs' benchmarks page). Extra flags go to each benchmark,
e.g. ``python benchmarks/run_all.py --layers 2 --hidden 64`` for a quick run.
"""
from __future__ import annotations

import json
import os
import platform
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_adamwdl  # noqa: E402
import bench_ema  # noqa: E402

import paddle  # noqa: E402

OUT_DIR = os.path.join(HERE, "..", "docs", "_static")


LABELS = {
    "adamwdl_ratio": "AdamWDL step, fast path (target <= 1.05x)",
    "adamwdl_wd_schedule_ratio": "AdamWDL step, weight-decay schedule (target <= 1.05x)",
    "adamwdl_general_path_ratio": "AdamWDL step, general path (no target)",
    "update_vs_adamw_ratio": "EMA update (target <= 0.5x)",
}


def _ratios(results: dict) -> dict:
    """Measured ratios under readable labels (a new benchmark key shows as itself)."""
    return {
        LABELS.get(key, key): value
        for key, value in results.items()
        if key.endswith("ratio") and key != "target_ratio" and isinstance(value, (int, float))
    }


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    results = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "paddle": paddle.__version__},
        "adamwdl": bench_adamwdl.main(argv),
        "ema": bench_ema.main(argv),
    }
    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(OUT_DIR, "benchmarks.json"), "w") as handle:
        json.dump(results, handle, indent=2, default=str)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no figure (pip install paddle_llrd[plot])")
        return 0
    bars = {key: value for bench in ("adamwdl", "ema") for key, value in _ratios(results[bench]).items()}
    fig, ax = plt.subplots(figsize=(10, 0.6 * len(bars) + 1.6))
    labels = list(bars)
    ax.barh(labels, [bars[k] for k in labels], color="tab:blue")
    ax.axvline(1.0, color="black", linewidth=1, label="paddle.optimizer.AdamW step")
    for y, key in enumerate(labels):
        ax.text(bars[key], y, f" {bars[key]:.3f}x", va="center")
    ax.set_xlabel("median time / median paddle.optimizer.AdamW step (BERT-base shape)")
    ax.set_xlim(0, 1.25 * max(bars.values()))
    ax.set_title(f"make bench ({os.cpu_count()} CPU cores, Paddle {paddle.__version__})")
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    fig.savefig(os.path.join(OUT_DIR, "benchmarks.png"), dpi=100)
    print(f"wrote {os.path.join(OUT_DIR, 'benchmarks.json')} and benchmarks.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
