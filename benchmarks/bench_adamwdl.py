"""Step time of ``AdamWDL`` against ``paddle.optimizer.AdamW`` on the same
parameters (target: <= 1.05x on BERT-base shapes, <= 1.0x with many small
tensors), and the optimizer state each keeps.

Two regimes (``--regime``, see ``bench_common.py``): ``bert-base``, the
BERT-base-shaped ``TinyBertForSequenceClassification`` (~110M parameters)
unless ``--layers`` / ``--hidden`` shrink it, and ``small-params``, 1,536 small
tensors where per-parameter Python dominates (three times ``--steps``
rounds: its steps are short and noisier). Gradients are set once. Four optimizers update the same parameters, timed in rotating order
in one process so that load from other processes on a shared CPU hits all
(the AdamWDL ones on their per-parameter path, ``use_multi_tensor=False``:
the multi-tensor path lays the parameters out in buffers of its own, so it
is measured with a model copy of its own by ``bench_training_loop.py``):

* ``paddle.optimizer.AdamW`` (the reference),
* ``AdamWDL`` with ``layerwise_decay=0.8`` and a real ``name_dict`` (the fused
  fast path every update takes in practice),
* the same ``AdamWDL`` forced onto its general path (a separate decay op),
* ``AdamWDL`` on the fast path with a ``WeightDecaySchedule`` (a cosine ramp
  from 0.0 to 0.1 over 1000 steps) as ``weight_decay``.

The ratios printed are medians of the per-round ratios to AdamW's step.

    python benchmarks/bench_adamwdl.py                          # BERT-base shape
    python benchmarks/bench_adamwdl.py --regime small-params    # many small tensors
    python benchmarks/bench_adamwdl.py --layers 2 --hidden 64   # a quick run
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from unittest import mock
from typing import Any

import paddle

from paddle_llrd import AdamWDL, WeightDecaySchedule
from paddle_llrd.optim import per_parameter
from bench_common import benchmark_model, describe, model_size_parser, parse_lenient, synthetic_backward

# The step-time ratio to AdamW each regime must stay under.
TARGET_RATIOS = {"bert-base": 1.05, "small-params": 1.0}


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = model_size_parser(__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=15, help="timed steps of each optimizer (default 15)")
    parser.add_argument("--layerwise-decay", type=float, default=0.8, help="AdamWDL's layerwise_decay (default 0.8)")
    return parse_lenient(parser, argv, "bench_adamwdl", counts=("steps", "layers", "hidden"))


def _state_size(optimizer: paddle.optimizer.Optimizer) -> tuple[int, int]:
    """(number of tensors, bytes) of the accumulators and master weights."""
    tensors = [t for per_param in optimizer._accumulators.values() for t in per_param.values()]
    tensors += list(optimizer._master_weights.values())
    return len(tensors), sum(int(t.size) * t.element_size() for t in tensors)


def _timed_step(optimizer: paddle.optimizer.Optimizer) -> float:
    start = time.perf_counter()
    optimizer.step()
    return time.perf_counter() - start


def _with_the_separate_decay_op(step: Any) -> Any:
    """``step`` with the fused decay rule answering None (as for a ratio of 0), so that
    every decay takes the separate op (docs/adamwdl.rst, "The decay")."""

    def step_with_the_separate_op() -> Any:
        with mock.patch.object(per_parameter, "fused_decay_coeff", lambda *args: None):
            return step()

    return step_with_the_separate_op


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; returns the settings, medians (ms), ratios and state sizes."""
    args = _parse(list(sys.argv[1:] if argv is None else argv))
    paddle.seed(0)
    model, n_layers = benchmark_model(args)
    target = TARGET_RATIOS[args.regime]
    rounds = args.steps * (3 if args.regime == "small-params" else 1)
    params = [p for p in model.parameters() if not p.stop_gradient]
    n_params = sum(int(p.size) for p in params)
    name_dict = {p.name: n for n, p in model.named_parameters()}

    synthetic_backward(params)  # dense gradients for every parameter, set once

    common = dict(learning_rate=1e-4, parameters=params, weight_decay=0.01)
    optimizers: dict[str, paddle.optimizer.Optimizer] = {
        "adamw": paddle.optimizer.AdamW(**common),
    }
    common["use_multi_tensor"] = False
    optimizers |= {
        "adamwdl": AdamWDL(
            **common, layerwise_decay=args.layerwise_decay, n_layers=n_layers, name_dict=name_dict
        ),
        "adamwdl_general": AdamWDL(
            **common, layerwise_decay=args.layerwise_decay, n_layers=n_layers, name_dict=name_dict
        ),
    }
    # the separate decay op for every parameter (the route of a ratio of 0 or a Tensor lr factor)
    general = optimizers["adamwdl_general"]
    general.step = _with_the_separate_decay_op(general.step)
    optimizers["adamwdl_wd_schedule"] = AdamWDL(
        **dict(common, weight_decay=WeightDecaySchedule(0.0, 0.1, total_steps=1000, style="cosine")),
        layerwise_decay=args.layerwise_decay,
        n_layers=n_layers,
        name_dict=name_dict,
    )

    for optimizer in optimizers.values():  # creates the moments outside the timed runs
        optimizer.step()
    names = list(optimizers)
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(_timed_step(optimizers[name]))

    def ratio_to_adamw(name: str) -> float:
        return statistics.median(t / a for t, a in zip(times[name], times["adamw"]))

    state = {name: _state_size(opt) for name, opt in optimizers.items()}
    results: dict[str, Any] = {
        "regime": args.regime,
        "tensors": len(params),
        "layers": n_layers,
        "hidden": args.hidden,
        "parameters": n_params,
        "steps": rounds,
        "layerwise_decay": args.layerwise_decay,
        "adamw_ms": 1e3 * statistics.median(times["adamw"]),
        "adamwdl_ms": 1e3 * statistics.median(times["adamwdl"]),
        "adamwdl_general_ms": 1e3 * statistics.median(times["adamwdl_general"]),
        "adamwdl_wd_schedule_ms": 1e3 * statistics.median(times["adamwdl_wd_schedule"]),
        "adamwdl_ratio": ratio_to_adamw("adamwdl"),
        "adamwdl_general_path_ratio": ratio_to_adamw("adamwdl_general"),
        "adamwdl_wd_schedule_ratio": ratio_to_adamw("adamwdl_wd_schedule"),
        "target_ratio": target,
        "adamw_state_tensors": state["adamw"][0],
        "adamw_state_bytes": state["adamw"][1],
        "adamwdl_state_tensors": state["adamwdl"][0],
        "adamwdl_state_bytes": state["adamwdl"][1],
        "adamwdl_extra_state_bytes": state["adamwdl"][1] - state["adamw"][1],
    }
    results["meets_target"] = results["adamwdl_ratio"] <= target
    results["wd_schedule_meets_target"] = results["adamwdl_wd_schedule_ratio"] <= target

    print(
        f"AdamWDL vs paddle.optimizer.AdamW, {describe(args, len(params), n_params)}, "
        f"{rounds} interleaved steps each"
    )
    print(f"  paddle.optimizer.AdamW        {results['adamw_ms']:9.2f} ms/step  1.000x")
    print(
        f"  AdamWDL (fused fast path)     {results['adamwdl_ms']:9.2f} ms/step  "
        f"{results['adamwdl_ratio']:.3f}x  (target <= {target}x: "
        f"{'met' if results['meets_target'] else 'MISSED'})"
    )
    print(
        f"  AdamWDL (general decay path)  {results['adamwdl_general_ms']:9.2f} ms/step  "
        f"{results['adamwdl_general_path_ratio']:.3f}x"
    )
    print(
        f"  AdamWDL (fast path, wd sched) {results['adamwdl_wd_schedule_ms']:9.2f} ms/step  "
        f"{results['adamwdl_wd_schedule_ratio']:.3f}x  (target <= {target}x: "
        f"{'met' if results['wd_schedule_meets_target'] else 'MISSED'})"
    )
    print(
        f"  optimizer state: AdamW {state['adamw'][0]} tensors / {state['adamw'][1] / 2**20:.1f} MiB, "
        f"AdamWDL {state['adamwdl'][0]} tensors / {state['adamwdl'][1] / 2**20:.1f} MiB "
        f"(extra {results['adamwdl_extra_state_bytes']} bytes)"
    )
    return results


if __name__ == "__main__":
    main()
