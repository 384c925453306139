"""Peak memory of training with ``AdamWDL`` against ``paddle.optimizer.AdamW``:
the peak resident set size (RSS) of a process that runs a few training steps
of the BERT-base-shaped model, with and without the gradient clipping users run.

Each optimizer runs in a fresh Python process of its own (a peak is a
process's high-water mark, so two optimizers in one process would share
theirs): the process imports Paddle, builds the bert-base regime's model
(``bench_common.py``; ``--layers`` x ``--hidden``, BERT-base's 12 x 768 by
default) on the CPU, builds the optimizer as ``bench_training_loop.py`` does
(AdamWDL with ``layerwise_decay=0.9``, ``use_multi_tensor`` at its default;
weight decay 0.01 except on biases) and runs ``--memory-steps`` (default 5)
steps of backward, ``step()``, ``clear_grad()``. The backward is the
training-loop benchmark's ``0.01 * sum`` of every parameter, without a
forward: activations would weigh the same on both sides and depend on the
batch, while what differs is what the optimizers keep and allocate.

Two configurations, each with both optimizers: ``grad_clip=
paddle.nn.ClipGradByGlobalNorm(1.0)`` (what PaddleNLP's and PaddleFormers'
Trainers pass) and no clipping. Reported per process: the peak RSS (Linux's
``VmHWM``, else ``ru_maxrss``), the RSS once the model is built, the peak
above it, the clip the optimizer held and AdamWDL's update paths (its
``last_update_path``, where it has one); per configuration, the ratio of the
peaks, AdamWDL's over AdamW's (lower is less memory). The peaks include
Python's and Paddle's own memory, the same in every process. No timing.

    python benchmarks/bench_memory.py                          # BERT-base shape
    python benchmarks/bench_memory.py --layers 2 --hidden 64   # a quick run
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from typing import Any

import paddle

from bench_common import (
    CLIP_DESCRIPTION, PathTally, add_bert_base_size, bert_base_shaped_model, describe_paths, grad_clip_name,
    parse_lenient, synthetic_backward, training_optimizer,
)

OPTIMIZERS = ("adamw", "adamwdl")
# The configuration users run first, as make bench reports it.
CONFIGS = {"clipped": True, "bare": False}
MIB = 1 << 20


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_bert_base_size(parser)
    parser.add_argument(
        "--memory-steps", type=int, default=5,
        help="training steps in each process (default 5; not --steps, which run_all.py passes on for the "
        "timed benchmarks)",
    )
    parser.add_argument("--layerwise-decay", type=float, default=0.9, help="AdamWDL's layerwise_decay (default 0.9)")
    # One process's measurement (run by the parent, one per optimizer and configuration).
    parser.add_argument("--measure", choices=OPTIMIZERS, help=argparse.SUPPRESS)
    parser.add_argument("--clip", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    return parse_lenient(parser, argv, "bench_memory", counts=("memory_steps", "layers", "hidden"))


def _status_bytes(field: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` in bytes (None where there is none: not Linux)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def peak_rss_bytes() -> int:
    """This process's peak RSS: ``VmHWM``, else ``ru_maxrss`` (KiB on Linux, bytes on macOS)."""
    peak = _status_bytes("VmHWM")
    if peak is not None:
        return peak
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss if sys.platform == "darwin" else maxrss * 1024


def current_rss_bytes() -> int | None:
    return _status_bytes("VmRSS")


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """In this (fresh) process: build the model and ``args.measure``'s optimizer, train, return the RSS figures."""
    # RSS is host memory: on a GPU the tensors would live elsewhere and the peaks say nothing.
    paddle.set_device("cpu")
    paddle.seed(0)
    rss_imported = current_rss_bytes()
    model = bert_base_shaped_model(args)
    params = [p for p in model.parameters() if not p.stop_gradient]
    rss_model = current_rss_bytes()
    optimizer = training_optimizer(
        args.measure, model, args.layers, clip=args.clip, layerwise_decay=args.layerwise_decay
    )
    tally = PathTally()
    for _ in range(args.memory_steps):
        synthetic_backward(params)
        optimizer.step()
        optimizer.clear_grad()
        tally.record(optimizer)
    peak = peak_rss_bytes()
    return {
        "optimizer": args.measure,
        "clip": args.clip,
        "grad_clip": grad_clip_name(optimizer),
        "update_paths": tally.summary() if args.measure == "adamwdl" else None,
        "parameters": sum(int(p.size) for p in params),
        "tensors": len(params),
        "steps": args.memory_steps,
        "peak_rss_mib": peak / MIB,
        "rss_after_import_mib": None if rss_imported is None else rss_imported / MIB,
        "rss_model_mib": None if rss_model is None else rss_model / MIB,
        "peak_above_model_mib": None if rss_model is None else (peak - rss_model) / MIB,
    }


def _in_fresh_process(argv: list[str], optimizer: str, clip: bool) -> dict[str, Any]:
    """:func:`measure` of ``optimizer`` in a new Python process, its results back as JSON."""
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "memory.json")
        command = [sys.executable, os.path.abspath(__file__), *argv, "--measure", optimizer, "--out", out]
        completed = subprocess.run(command + (["--clip"] if clip else []), capture_output=True, text=True)
        if completed.returncode != 0:
            raise RuntimeError(f"bench_memory.py --measure {optimizer} exited with {completed.returncode}:\n"
                               f"{completed.stderr[-3000:]}")
        with open(out) as handle:
            return json.load(handle)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; returns, per configuration, each process's figures and the ratio of the peaks."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parse(argv)
    if args.measure is not None:
        results = measure(args)
        if args.out is not None:
            with open(args.out, "w") as handle:
                json.dump(results, handle)
        return results
    # The child gets the size flags only (not flags meant for other benchmarks).
    child_argv = ["--layers", str(args.layers), "--hidden", str(args.hidden),
                  "--memory-steps", str(args.memory_steps), "--layerwise-decay", str(args.layerwise_decay)]
    results: dict[str, Any] = {"layers": args.layers, "hidden": args.hidden, "steps": args.memory_steps}
    for config, clip in CONFIGS.items():
        runs = {name: _in_fresh_process(child_argv, name, clip) for name in OPTIMIZERS}
        results[config] = {
            "clip": clip,
            **runs,
            "peak_ratio": runs["adamwdl"]["peak_rss_mib"] / runs["adamw"]["peak_rss_mib"],
        }
    results["parameters"] = results["bare"]["adamw"]["parameters"]
    _print(results)
    return results


def _print(results: dict[str, Any]) -> None:
    print(
        f"Peak RSS of {results['steps']} training steps, bert-base: {results['layers']} layers, hidden "
        f"{results['hidden']}, {results['parameters'] / 1e6:.1f}M parameters, each optimizer in a fresh process "
        "(ratio AdamWDL / AdamW, lower is less memory)"
    )
    for config in CONFIGS:
        row = results[config]
        adamw, adamwdl = row["adamw"], row["adamwdl"]
        above = (
            "" if adamw["peak_above_model_mib"] is None
            else f"; above the built model AdamW {adamw['peak_above_model_mib']:.0f} MiB, "
            f"AdamWDL {adamwdl['peak_above_model_mib']:.0f} MiB"
        )
        print(
            f"  {'grad_clip=' + CLIP_DESCRIPTION if row['clip'] else 'no gradient clipping':34s} "
            f"AdamW {adamw['peak_rss_mib']:8.0f} MiB  AdamWDL {adamwdl['peak_rss_mib']:8.0f} MiB  "
            f"{row['peak_ratio']:.3f}x{above}; AdamWDL {describe_paths(adamwdl['update_paths'])}"
        )


if __name__ == "__main__":
    main()
