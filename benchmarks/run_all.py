"""``make bench``: every benchmark in both regimes, with and without the
gradient clipping users run, and the peak memory, in one run; time ratios
(lower is faster) against ``paddle.optimizer.AdamW`` measured in the same
process as what it is compared with; each benchmark, configuration and regime
in a Python process of its own (:func:`run_in_own_interpreter`).

The regimes (``bench_common.py``): ``bert-base`` (BERT-base shapes, few large
tensors) and ``small-params`` (1,536 small tensors, where per-parameter Python
dominates; the training-loop benchmark spreads them over 96 blocks). In
the order printed and written:

1. **The configuration users run**: ``bench_training_loop.py --clip``
   (``step(); clear_grad()`` in a training loop, AdamWDL's multi-tensor and
   per-parameter paths, every optimizer AdamW included with
   ``grad_clip=paddle.nn.ClipGradByGlobalNorm(1.0)``, as PaddleNLP's and
   PaddleFormers' Trainers pass it), with the update path AdamWDL's steps took.
2. **No gradient clipping**: ``bench_training_loop.py`` as above without the
   clip, ``bench_adamwdl.py`` (step only, AdamWDL's per-parameter path) and
   ``bench_ema.py``.
3. **Peak memory**: ``bench_memory.py`` (bert-base shapes only), the peak RSS
   of a few training steps, each optimizer in a fresh process, clipped and not.
4. **Detail**: the training loop's rows with glibc's deferred work from the
   backward's frees paid before the timer ("frees settled"), the
   multi-tensor kernel calls alone (floor) and the memory floor, with the
   thread count and the kernels', AdamW's and the machine's GB/s measured in
   the same run; the EMA update's GB/s and those its target would need.

Prints those tables and writes ``benchmarks.json`` (the same sections, in
that order, each with its raw results) and ``benchmarks.png`` (the figure on
the docs' benchmarks page: the configuration users run on top, the detail
rows in a panel of their own at the bottom) to ``docs/_static``, or to
``--out-dir``. Extra flags go to each benchmark, e.g.
``python benchmarks/run_all.py --layers 2 --hidden 64 --steps 5`` for a quick
run (the small-params regime keeps its size unless ``--small-params`` is given).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_common import CLIP_DESCRIPTION, REGIMES, describe_norms, describe_paths  # noqa: E402

import paddle  # noqa: E402

from paddle_llrd.optim.fused_operator import cpu_info  # noqa: E402
from paddle_llrd.optim.threads import available_cores  # noqa: E402

OUT_DIR = os.path.join(HERE, "..", "docs", "_static")

CLIPPED_TITLE = (
    f"Configuration users run: grad_clip=paddle.nn.{CLIP_DESCRIPTION} (PaddleNLP's and PaddleFormers' Trainers); "
    "step(); clear_grad() in a training loop, time ratio to paddle.optimizer.AdamW with the same clip"
)
BARE_TITLE = "No gradient clipping: time ratio to paddle.optimizer.AdamW (step, or step+clear_grad)"
MEMORY_TITLE = "Peak memory: peak RSS of bert-base training steps, AdamWDL / AdamW, each in a fresh process"
DETAIL_TITLE = (
    "Detail: the training loop's rows with the backward's frees settled, and the multi-tensor path's floors"
)
# Ratio keys of the benchmarks under readable labels (paths named as docs/adamwdl.rst
# names them); a new ratio key shows as itself.
LABELS = {
    "loop_multi_tensor_ratio": "AdamWDL step+clear_grad, multi-tensor path (default)",
    "loop_per_parameter_ratio": "AdamWDL step+clear_grad, per-parameter path",
    "adamwdl_ratio": "AdamWDL step, per-parameter path (fast path)",
    "adamwdl_wd_schedule_ratio": "AdamWDL step, per-parameter path, weight-decay schedule",
    "adamwdl_general_path_ratio": "AdamWDL step, per-parameter path (general path)",
    "update_vs_adamw_ratio": "EMA update, own-storage params",
    "update_multi_tensor_layout_vs_adamw_ratio": "EMA update, multi-tensor layout",
}
# The training loop's ratios that go to the detail section, not the headline tables.
DETAIL_LABELS = {
    "settled_loop_multi_tensor_ratio": "multi-tensor path, frees settled",
    "settled_loop_per_parameter_ratio": "per-parameter path, frees settled",
    "kernel_calls_alone_ratio": "multi-tensor kernel calls alone (floor)",
    "gradients_alone_ratio": "gradients alone (read, handed, cleared)",
    "settled_gradients_alone_ratio": "gradients alone, frees settled",
    "step_floor_ratio": "step floor (kernel calls + gradients alone)",
    "memory_floor_ratio": "memory floor (28 B/parameter at measured GB/s)",
}
CONFIG_NAMES = {"clipped": CLIP_DESCRIPTION, "bare": "no clipping"}
BENCHMARKS = {"clipped": ("training_loop",), "bare": ("training_loop", "adamwdl", "ema")}


def cpu_description() -> dict[str, Any]:
    """The CPU's model name and whether it has AVX-512F: where it has, Paddle's CPU AdamW (and the
    fused operator, to keep its bits) runs phi's generated float32 kernel, elsewhere its reference
    loop, whose double-precision last line is compute-bound on one thread."""
    fields = cpu_info()
    return {"cpu": fields.get("model name") or platform.processor() or platform.machine(),
            "avx512f": "avx512f" in fields.get("flags", "").split()}


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


def _is_ratio(key: str, value: Any) -> bool:
    return key.endswith("ratio") and key != "target_ratio" and (value is None or isinstance(value, (int, float)))


def _headline_table(by_regime: dict[str, dict[str, dict]]) -> dict[str, dict[str, float | None]]:
    """``{label: {regime: ratio}}`` over one configuration's benchmarks, without the detail rows."""
    table: dict[str, dict[str, float | None]] = {}
    for regime, benches in by_regime.items():
        for results in benches.values():
            for key, value in results.items():
                if _is_ratio(key, value) and key not in DETAIL_LABELS:
                    table.setdefault(LABELS.get(key, key), {})[regime] = value
    return table


def _detail_table(sections: dict[str, dict]) -> dict[str, dict[str, float | None]]:
    """``{"<configuration>: <label>": {regime: ratio}}``: the detail rows of every configuration's training loop."""
    table: dict[str, dict[str, float | None]] = {}
    for config, section in sections.items():
        for regime, benches in section["results"].items():
            loop = benches["training_loop"]
            for key, label in DETAIL_LABELS.items():
                table.setdefault(f"{CONFIG_NAMES[config]}: {label}", {})[regime] = loop.get(key)
    return table


def _bandwidth(sections: dict[str, dict]) -> dict[str, dict[str, dict]]:
    """Per configuration and regime: the multi-tensor step's threads, its kernels' GB/s, AdamW's, the
    machine's, and (clipped) the clip's squared norms against Paddle's kernels for them."""
    keys = ("num_threads", "kernel_gbs", "adamw_gbs", "machine_gbs", "norms_ms", "norms_gbs", "paddle_norms_ms")
    return {
        config: {regime: {key: benches["training_loop"][key] for key in keys}
                 for regime, benches in section["results"].items()}
        for config, section in sections.items()
    }


def _ema_bandwidth(by_regime: dict[str, dict[str, dict]]) -> dict[str, dict[str, float | None]]:
    """Per regime: the EMA update's GB/s (own storage, laid out) and the GB/s its target would need."""
    keys = ("update_gbs", "multi_tensor_layout_update_gbs", "target_gbs")
    return {regime: {key: benches["ema"][key] for key in keys} for regime, benches in by_regime.items()}


def _targets(by_regime: dict[str, dict[str, dict]]) -> dict[str, float | None]:
    return {f"{bench} {regime}": results["target_ratio"] for regime, benches in by_regime.items()
            for bench, results in benches.items()}


def _update_paths(by_regime: dict[str, dict[str, dict]]) -> dict[str, dict[str, Any]]:
    """Per regime: the update paths each AdamWDL of the training loop took (None where unreported)."""
    return {regime: benches["training_loop"]["update_paths"] for regime, benches in by_regime.items()}


def _memory_table(memory: dict) -> dict[str, dict[str, float]]:
    """``{configuration: {"AdamW MiB", "AdamWDL MiB", "ratio"}}`` of the peaks."""
    return {
        CONFIG_NAMES[config]: {
            "AdamW MiB": memory[config]["adamw"]["peak_rss_mib"],
            "AdamWDL MiB": memory[config]["adamwdl"]["peak_rss_mib"],
            "ratio": memory[config]["peak_ratio"],
        }
        for config in CONFIG_NAMES
    }


def _cell(value: float | None) -> str:
    return f"{'n/a':>13s} " if value is None else f"{value:13.3f}x"


def _print_ratios(title: str, table: dict[str, dict[str, float | None]]) -> None:
    width = max(map(len, table)) + 2
    print()
    print(title)
    print(f"  {'(median per-round ratio, lower is faster)':{width}s}" + "".join(f"{r:>14s}" for r in REGIMES))
    for label, by_regime in table.items():
        print(f"  {label:{width}s}" + "".join(_cell(by_regime.get(regime)) for regime in REGIMES))


def _print_paths(paths: dict[str, dict[str, Any]]) -> None:
    for regime, by_optimizer in paths.items():
        print(
            f"  update paths, {regime}: default AdamWDL {describe_paths(by_optimizer['adamwdl_multi_tensor'])}; "
            f"use_multi_tensor=False {describe_paths(by_optimizer['adamwdl_per_parameter'])}"
        )


def _print_targets(targets: dict[str, float | None]) -> None:
    print("  targets: " + ", ".join(f"{key} <= {value}x" for key, value in targets.items() if value is not None))


def _print(results: dict) -> None:
    for config in ("clipped", "bare"):
        section = results[config]
        _print_ratios(section["title"], section["table"])
        _print_paths(section["update_paths"])
        _print_targets(section["targets"])
    memory = results["memory"]
    print()
    raw = memory["results"]
    print(f"{MEMORY_TITLE} ({raw['steps']} steps, {raw['parameters'] / 1e6:.1f}M parameters)")
    for config, row in memory["table"].items():
        print(f"  {config:34s}AdamW {row['AdamW MiB']:8.0f} MiB  AdamWDL {row['AdamWDL MiB']:8.0f} MiB  "
              f"{row['ratio']:.3f}x")
    detail = results["detail"]
    _print_ratios(detail["title"], detail["table"])
    for config, by_regime in detail["bandwidth"].items():
        for regime, row in by_regime.items():
            kernels = "not measured" if row["kernel_gbs"] is None else f"{row['kernel_gbs']:.1f} GB/s"
            print(
                f"  {CONFIG_NAMES[config]}, {regime}: multi-tensor step on {row['num_threads']} thread(s); its kernel "
                f"calls {kernels}, AdamW's step {row['adamw_gbs']:.1f} GB/s, a NumPy copy "
                f"{row['machine_gbs']:.1f} GB/s (the machine, now)"
            )
            if row["norms_ms"] is not None:
                print(f"    {describe_norms(row)}")
    for regime, row in detail["ema_bandwidth"].items():
        needed = "" if row["target_gbs"] is None else f"; its target would need {row['target_gbs']:.1f} GB/s"
        print(f"  EMA update, {regime}: {row['update_gbs']:.1f} GB/s in own storage, "
              f"{row['multi_tensor_layout_update_gbs']:.1f} GB/s laid out{needed}")


def _default_paths(paths: dict[str, dict[str, Any]]) -> str:
    """The update paths the default AdamWDL took, per regime, in a line (the figure's note under a panel)."""
    return "default AdamWDL: " + "; ".join(
        f"{regime} {describe_paths(by_optimizer['adamwdl_multi_tensor'])}" for regime, by_optimizer in paths.items()
    )


def _panel(
    ax: Any, table: dict[str, dict[str, float | None]], series: tuple[str, ...], title: str, xlabel: str,
    headline: bool = False,
) -> None:
    """One panel of horizontal bars: a row per label, a bar per series (regime or configuration)."""
    labels = list(table)
    height = 0.8 / len(series)
    top = 1.0
    for offset, (name, color) in enumerate(zip(series, ("tab:blue", "tab:orange"))):
        ys = [y + (offset - (len(series) - 1) / 2) * height for y in range(len(labels))]
        values = [table[label].get(name) for label in labels]
        shown = [0.0 if value is None or not math.isfinite(value) else value for value in values]
        ax.barh(ys, shown, height=height, color=color, label=name)
        for y, value in zip(ys, values):
            ax.text(0 if value is None else value, y, " n/a" if value is None else f" {value:.3f}x",
                    va="center", fontsize="small")
        top = max(top, *shown)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xlim(0, 1.25 * top)
    ax.set_title(title, fontsize="large" if headline else "medium", fontweight="bold" if headline else None, loc="left")
    ax.set_xlabel(xlabel, fontsize="small")
    # (outside the axes, on the right: inside, it hides the bars' values)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")


def _draw(results: dict, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no figure (pip install paddle_llrd[plot])")
        return
    time_axis = "time ratio to paddle.optimizer.AdamW, lower is faster (1.0 = AdamW)"
    memory = {"peak RSS, AdamWDL / AdamW": {
        name: results["memory"]["table"][name]["ratio"] for name in CONFIG_NAMES.values()
    }}
    panels = [
        (results["clipped"]["table"], REGIMES, f"Configuration users run: grad_clip={CLIP_DESCRIPTION}",
         time_axis + "\n" + _default_paths(results["clipped"]["update_paths"])),
        (results["bare"]["table"], REGIMES, "No gradient clipping",
         time_axis + "\n" + _default_paths(results["bare"]["update_paths"])),
        (memory, tuple(CONFIG_NAMES.values()), "Peak memory (bert-base)", "peak RSS ratio to AdamW's, lower is less"),
        (results["detail"]["table"], REGIMES, "Detail (not the configuration users run)", time_axis),
    ]
    rows = [len(table) for table, *_ in panels]
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(12, 0.55 * sum(rows) + 2.2 * len(panels)),
        gridspec_kw={"height_ratios": [row + 1.5 for row in rows]},
    )
    for index, (ax, (table, series, title, xlabel)) in enumerate(zip(axes, panels)):
        _panel(ax, table, series, title, xlabel, headline=index == 0)
    fig.suptitle(f"make bench ({os.cpu_count()} CPU cores, Paddle {paddle.__version__})")
    fig.tight_layout(rect=(0, 0, 1, 0.98))  # (the top 2% for the suptitle, which tight_layout leaves out)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    # allow_abbrev=False: a prefix of --out-dir may be a benchmark's own flag, passed on.
    parser = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__.splitlines()[0].replace("``", ""),
        epilog="Other flags (--layers, --hidden, --steps, --small-params, --num-threads, --memory-steps, ...) "
        "go to each benchmark; a benchmark ignores those it has not.",
    )
    parser.add_argument(
        "--out-dir", default=OUT_DIR,
        help="where benchmarks.json and benchmarks.png go (default docs/_static: the published figure)",
    )
    return parser.parse_known_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    for flag, what in (("--regime", "both regimes"), ("--clip", "with and without clipping")):
        if any(arg.startswith(flag) for arg in argv):
            print(f"run_all: runs {what}; {flag} is for the single benchmarks")
            return 2
    args, argv = _parse(argv)
    out_dir = args.out_dir
    results: dict = {
        "machine": {
            "platform": platform.platform(), "cpus": os.cpu_count(), "cores_available": available_cores(),
            "paddle": paddle.__version__, **cpu_description(),
        },
    }
    # The configuration users run first: in the JSON, the table and the figure.
    for config, title in (("clipped", CLIPPED_TITLE), ("bare", BARE_TITLE)):
        extra = ["--clip"] if config == "clipped" else []
        by_regime = {
            regime: {bench: run_in_own_interpreter(bench, argv + ["--regime", regime, *extra])
                     for bench in BENCHMARKS[config]}
            for regime in REGIMES
        }
        results[config] = {
            "title": title, "table": _headline_table(by_regime), "update_paths": _update_paths(by_regime),
            "targets": _targets(by_regime), "results": by_regime,
        }
    memory = run_in_own_interpreter("memory", argv)
    results["memory"] = {"title": MEMORY_TITLE, "table": _memory_table(memory), "results": memory}
    sections = {config: results[config] for config in ("clipped", "bare")}
    results["detail"] = {"title": DETAIL_TITLE, "table": _detail_table(sections), "bandwidth": _bandwidth(sections),
                         "ema_bandwidth": _ema_bandwidth(results["bare"]["results"])}
    _print(results)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "benchmarks.json"), "w") as handle:
        json.dump(results, handle, indent=2, default=str)
    _draw(results, os.path.join(out_dir, "benchmarks.png"))
    print(f"wrote {os.path.join(out_dir, 'benchmarks.json')} and benchmarks.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
