"""``make bench``: every benchmark in both regimes in one run, time ratios
(lower is faster) against ``paddle.optimizer.AdamW`` measured in the same process
as what it is compared with; each benchmark and regime in a Python process of
its own (:func:`run_in_own_interpreter`).

The regimes (``bench_common.py``): ``bert-base`` (BERT-base shapes, few large
tensors) and ``small-params`` (1,536 small tensors, where per-parameter Python
dominates; the training-loop benchmark spreads them over 96 blocks). Each
regime runs ``bench_adamwdl.py`` (step only, AdamWDL's per-parameter path),
``bench_ema.py`` and ``bench_training_loop.py`` (``step(); clear_grad()`` in a
training loop, AdamWDL's multi-tensor and per-parameter paths, with the
thread count, the kernel calls' achieved GB/s against the memory bandwidth
measured in the same run, and the memory floor). Prints a table of the time ratios of both and writes
``docs/_static/benchmarks.json`` and ``docs/_static/benchmarks.png`` (the
figure on the docs' benchmarks page). Extra flags go to each benchmark, e.g.
``python benchmarks/run_all.py --layers 2 --hidden 64 --steps 5`` for a quick
run (the small-params regime keeps its size unless ``--small-params`` is given).
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_common import REGIMES  # noqa: E402

import paddle  # noqa: E402

from paddle_llrd.optim.threads import available_cores  # noqa: E402

OUT_DIR = os.path.join(HERE, "..", "docs", "_static")


LABELS = {
    "adamwdl_ratio": "AdamWDL step, fast path",
    "adamwdl_wd_schedule_ratio": "AdamWDL step, weight-decay schedule",
    "adamwdl_general_path_ratio": "AdamWDL step, general path (no target)",
    "update_vs_adamw_ratio": "EMA update, own-storage params",
    "update_multi_tensor_layout_vs_adamw_ratio": "EMA update, multi-tensor layout",
    "loop_multi_tensor_ratio": "AdamWDL step+clear_grad, multi-tensor",
    "loop_per_parameter_ratio": "AdamWDL step+clear_grad, per-parameter",
    "settled_loop_multi_tensor_ratio": "the same, multi-tensor, frees settled",
    "settled_loop_per_parameter_ratio": "the same, per-parameter, frees settled",
    "kernel_calls_alone_ratio": "multi-tensor kernel calls alone (floor)",
    "memory_floor_ratio": "memory floor (28 B/parameter at measured GB/s)",
}
BENCHMARKS = ("adamwdl", "ema", "training_loop")


def run_in_own_interpreter(bench: str, argv: list[str]) -> dict:
    """``bench_<bench>.main(argv)`` in a new Python process, its results back as JSON.

    One benchmark's leftovers (the heap glibc keeps, the garbage collector's
    generations, a thread pool) would otherwise weigh on the next: run in
    this process after the bert-base benchmarks, the small-params training
    loop's settled ratio read 0.181x, against 0.147x-0.154x in a process of
    its own. The child prints to this process's stdout as it goes.
    """
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "results.json")
        code = (
            "import json, sys; sys.path.insert(0, sys.argv[1]); "
            f"import bench_{bench} as bench; "
            "results = bench.main(sys.argv[3:]); "
            "json.dump(results, open(sys.argv[2], 'w'), default=str)"
        )
        sys.stdout.flush()  # (the child writes to the same stdout, after what is printed here)
        completed = subprocess.run([sys.executable, "-c", code, HERE, out, *argv])
        if completed.returncode != 0:
            raise RuntimeError(f"bench_{bench}.py {' '.join(argv)} exited with {completed.returncode}")
        with open(out) as handle:
            return json.load(handle)


def _ratios(results: dict) -> dict:
    """Measured ratios under readable labels (a new benchmark key shows as itself)."""
    return {
        LABELS.get(key, key): value
        for key, value in results.items()
        if key.endswith("ratio") and key != "target_ratio" and isinstance(value, (int, float))
    }


def _table(results: dict) -> dict[str, dict[str, float]]:
    """``{label: {regime: ratio}}`` over both benchmarks and regimes."""
    table: dict[str, dict[str, float]] = {}
    for regime in REGIMES:
        for bench in BENCHMARKS:
            for label, value in _ratios(results[regime][bench]).items():
                table.setdefault(label, {})[regime] = value
    return table


def _targets(results: dict) -> dict[str, float | None]:
    return {
        f"{bench} {regime}": results[regime][bench]["target_ratio"] for regime in REGIMES for bench in BENCHMARKS
    }


def _bandwidth(results: dict) -> dict[str, dict[str, float]]:
    """Per regime: the multi-tensor step's threads, its kernels' GB/s, AdamW's, the machine's."""
    keys = ("num_threads", "kernel_gbs", "adamw_gbs", "machine_gbs")
    return {regime: {key: results[regime]["training_loop"][key] for key in keys} for regime in REGIMES}


def _print_table(table: dict[str, dict[str, float]], targets: dict[str, float | None], bandwidth: dict) -> None:
    print()
    print(
        "Median per-round time ratio (lower is faster) to paddle.optimizer.AdamW "
        "(step, or step+clear_grad; same run, interleaved)"
    )
    print(f"  {'':42s}" + "".join(f"{regime:>14s}" for regime in REGIMES))
    for label, by_regime in table.items():
        print(f"  {label:42s}" + "".join(f"{by_regime.get(regime, float('nan')):13.3f}x" for regime in REGIMES))
    print("  targets: " + ", ".join(f"{key} <= {value}x" for key, value in targets.items() if value is not None))
    for regime, row in bandwidth.items():
        print(
            f"  {regime}: multi-tensor step on {row['num_threads']} thread(s); its kernel calls {row['kernel_gbs']:.1f} GB/s, "
            f"AdamW's step {row['adamw_gbs']:.1f} GB/s, a NumPy copy {row['machine_gbs']:.1f} GB/s (the machine, now)"
        )


def _draw(table: dict[str, dict[str, float]]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no figure (pip install paddle_llrd[plot])")
        return
    labels = list(table)
    height = 0.38
    fig, ax = plt.subplots(figsize=(10, 0.9 * len(labels) + 1.8))
    top = 0.0
    for offset, (regime, color) in enumerate(zip(REGIMES, ("tab:blue", "tab:orange"))):
        ys = [y + (offset - 0.5) * height for y in range(len(labels))]
        values = [table[label].get(regime, 0.0) for label in labels]
        ax.barh(ys, values, height=height, color=color, label=regime)
        for y, value in zip(ys, values):
            ax.text(value, y, f" {value:.3f}x", va="center", fontsize="small")
        top = max(top, *values)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xlabel("time ratio to paddle.optimizer.AdamW, lower is faster (1.0 = AdamW)")
    ax.set_xlim(0, 1.25 * top)
    ax.set_title(f"make bench ({os.cpu_count()} CPU cores, Paddle {paddle.__version__}; time ratio, lower is faster)")
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    fig.savefig(os.path.join(OUT_DIR, "benchmarks.png"), dpi=100)


def main(argv: list[str] | None = None) -> int:
    argv = [arg for arg in (sys.argv[1:] if argv is None else argv)]
    if any(arg.startswith("--regime") for arg in argv):
        print("run_all: runs both regimes; --regime is for the single benchmarks")
        return 2
    results: dict = {
        "machine": {
            "platform": platform.platform(), "cpus": os.cpu_count(), "cores_available": available_cores(),
            "paddle": paddle.__version__,
        }
    }
    for regime in REGIMES:
        regime_argv = argv + ["--regime", regime]
        results[regime] = {bench: run_in_own_interpreter(bench, regime_argv) for bench in BENCHMARKS}
    table = _table(results)
    results["bandwidth"] = _bandwidth(results)
    _print_table(table, _targets(results), results["bandwidth"])
    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(OUT_DIR, "benchmarks.json"), "w") as handle:
        json.dump(results, handle, indent=2, default=str)
    _draw(table)
    print(f"wrote {os.path.join(OUT_DIR, 'benchmarks.json')} and benchmarks.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
