"""Cost of ``ExponentialMovingAverage.update()`` against one
``paddle.optimizer.AdamW`` step on the same parameters (target: <= 0.1x on
BERT-base shapes, the update's one pass over memory on the fused operator;
measured without a target with many small tensors).

The model is that of ``--regime`` (see ``bench_common.py``): the
BERT-base-shaped ``TinyBertForSequenceClassification`` (~110M parameters)
unless ``--layers`` / ``--hidden`` shrink it, or 1,536 small tensors
(``small-params``, three times the repetitions). Gradients are set once; the
two operations are timed alternately in one process and the medians of the
per-round ratios reported, so that load from other processes on a shared CPU
hits both. Two rows, each against the AdamW step timed beside it:

* the parameters as built (each in a buffer of its own, as with
  ``paddle.optimizer.AdamW``): the update reads the large ones where they are
  and gathers the small ones into one flat tensor per dtype;
* then the same parameters after one (untimed) step of ``AdamWDL``'s
  multi-tensor path, which makes them views of flat buffers: the update
  reads those buffers in place.

Where the fused operator is built, the update is one call of it (one pass
over the shadows and the parameters, on the EMA's threads); without it,
three of Paddle's elementwise ops per segment. Each row also gives the
update's GB/s, at the bytes one pass moves (the shadow read and written, the
parameter read: 12 bytes per float32 parameter), and the GB/s that an update
at the target ratio of the AdamW step timed beside it would need.

    python benchmarks/bench_ema.py                          # BERT-base shape
    python benchmarks/bench_ema.py --regime small-params    # many small tensors
    python benchmarks/bench_ema.py --layers 2 --hidden 64   # a quick run
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import paddle

from paddle_llrd import AdamWDL, ExponentialMovingAverage
from paddle_llrd.optim.fused_operator import unavailable_reason
from bench_common import benchmark_model, describe, model_size_parser, parse_lenient, synthetic_backward

# The bert-base regime's target; small tensors are measured, without a target.
TARGET_RATIOS = {"bert-base": 0.1, "small-params": None}


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = model_size_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--repeats", "--steps", dest="repeats", type=int, default=15,
        help="timed repetitions of each operation (default 15; --steps as in bench_adamwdl.py)",
    )
    parser.add_argument("--decay", type=float, default=0.999, help="EMA decay (default 0.999)")
    return parse_lenient(parser, argv, "bench_ema", counts=("repeats", "layers", "hidden"))


def _time_into(function, timings: list[float]) -> None:
    start = time.perf_counter()
    function()
    timings.append(time.perf_counter() - start)


def _interleaved(ema: ExponentialMovingAverage, optimizer, repeats: int) -> tuple[float, float, float]:
    """Median update ms, median step ms and the median per-round ratio, timed alternately."""
    ema_times: list[float] = []
    adamw_times: list[float] = []
    for index in range(repeats):
        first, second = (ema.update, optimizer.step) if index % 2 == 0 else (optimizer.step, ema.update)
        _time_into(first, ema_times if first == ema.update else adamw_times)
        _time_into(second, ema_times if second == ema.update else adamw_times)
    ratio = statistics.median(e / a for e, a in zip(ema_times, adamw_times))
    return 1e3 * statistics.median(ema_times), 1e3 * statistics.median(adamw_times), ratio


def pass_bytes(ema: ExponentialMovingAverage, model: paddle.nn.Layer) -> int:
    """The bytes one update moves at the least: each shadow read and written, its parameter read."""
    params = dict(model.named_parameters())
    return sum(int(shadow.size) * (2 * shadow.element_size() + params[name].element_size())
               for name, shadow in ema.shadow.items())


def _gbs(moved: int, milliseconds: float) -> float:
    return moved / (milliseconds / 1e3) / 1e9


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark; returns the settings, medians (ms) and the ratios."""
    args = _parse(list(sys.argv[1:] if argv is None else argv))
    paddle.seed(0)
    model, _ = benchmark_model(args)
    repeats = args.repeats * (3 if args.regime == "small-params" else 1)
    params = [p for p in model.parameters() if not p.stop_gradient]
    n_params = sum(int(p.size) for p in params)

    synthetic_backward(params)  # dense gradients for every parameter, set once
    optimizer = paddle.optimizer.AdamW(learning_rate=1e-4, parameters=params, weight_decay=0.01)
    ema = ExponentialMovingAverage(model, decay=args.decay)
    ema.register()

    optimizer.step()  # creates the moments outside the timed runs
    ema.update()
    ema_ms, adamw_ms, ratio = _interleaved(ema, optimizer, repeats)
    moved = pass_bytes(ema, model)

    # AdamWDL's multi-tensor step makes the parameters (and gradients) views of
    # flat buffers; AdamW's in-place step keeps them so. The next update lays the shadows out alike.
    layout = AdamWDL(learning_rate=1e-4, parameters=params, weight_decay=0.01)
    layout.step()
    if layout.last_update_path.path == "per_parameter":
        raise RuntimeError(f"AdamWDL did not take its multi-tensor step: {layout.last_update_path}")
    ema.update()
    laid_out_ema_ms, laid_out_adamw_ms, laid_out_ratio = _interleaved(ema, optimizer, repeats)

    results = {
        "regime": args.regime,
        "layers": args.layers,
        "hidden": args.hidden,
        "parameters": n_params,
        "tensors": len(params),
        "repeats": repeats,
        "num_threads": ema.num_threads,
        "fused_operator": unavailable_reason() is None,
        "ema_update_ms": round(ema_ms, 3),
        "adamw_step_ms": round(adamw_ms, 3),
        "update_vs_adamw_ratio": round(ratio, 4),
        "multi_tensor_layout_ema_update_ms": round(laid_out_ema_ms, 3),
        "multi_tensor_layout_adamw_step_ms": round(laid_out_adamw_ms, 3),
        "update_multi_tensor_layout_vs_adamw_ratio": round(laid_out_ratio, 4),
        "target_ratio": TARGET_RATIOS[args.regime],
        "pass_bytes": moved,
        "update_gbs": _gbs(moved, ema_ms),
        "multi_tensor_layout_update_gbs": _gbs(moved, laid_out_ema_ms),
        # (the AdamW step timed beside the laid-out update: the one the operator's layout serves)
        "target_gbs": None if TARGET_RATIOS[args.regime] is None
        else _gbs(moved, TARGET_RATIOS[args.regime] * laid_out_adamw_ms),
    }
    target = f"(target <= {TARGET_RATIOS[args.regime]})" if TARGET_RATIOS[args.regime] else "(no target)"
    needed = ("" if results["target_gbs"] is None
              else f"; at the target, {results['target_gbs']:.1f} GB/s beside that AdamW step")
    print(
        f"EMA update vs AdamW step, {describe(args, len(params), n_params)}, {repeats} interleaved runs each, "
        f"{ema.num_threads} thread(s), {'the fused operator' if results['fused_operator'] else 'Paddle ops'}; "
        f"time ratio (lower is faster):\n"
        f"  parameters in buffers of their own: "
        f"median update {ema_ms:.2f} ms, AdamW step {adamw_ms:.2f} ms, ratio {ratio:.3f} {target}\n"
        f"  laid out by AdamWDL's multi-tensor step: "
        f"median update {laid_out_ema_ms:.2f} ms, AdamW step {laid_out_adamw_ms:.2f} ms, ratio {laid_out_ratio:.3f} {target}\n"
        f"  (one pass moves {moved / 1e6:.1f} MB: the update {results['update_gbs']:.1f} GB/s in own storage, "
        f"{results['multi_tensor_layout_update_gbs']:.1f} GB/s laid out{needed})"
    )
    return results


if __name__ == "__main__":
    main()
