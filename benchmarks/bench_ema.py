"""Cost of ``ExponentialMovingAverage.update()`` against one
``paddle.optimizer.AdamW`` step on the same parameters (target: <= 0.5x).

The model is the BERT-base-shaped ``TinyBertForSequenceClassification``
(~110M parameters) unless ``--layers`` / ``--hidden`` shrink it. Gradients are
set once; the two operations are timed alternately in one process and the
medians compared, so that load from other processes on a shared CPU hits both.

    python benchmarks/bench_ema.py                          # BERT-base shape
    python benchmarks/bench_ema.py --layers 2 --hidden 64   # a quick run
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import paddle

from paddle_llrd import ExponentialMovingAverage
from bench_common import bert_base_shaped_model, model_size_parser, parse_lenient

TARGET_RATIO = 0.5


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


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark; returns the settings, medians (ms) and the ratio."""
    args = _parse(list(sys.argv[1:] if argv is None else argv))
    paddle.seed(0)
    model = bert_base_shaped_model(args)
    params = [p for p in model.parameters() if not p.stop_gradient]
    n_params = sum(int(p.size) for p in params)

    # dense gradients for every parameter (0.01 * (p_0 + ... ) summed), set once
    paddle.add_n([(p * 0.01).sum() for p in params]).backward()
    optimizer = paddle.optimizer.AdamW(learning_rate=1e-4, parameters=params, weight_decay=0.01)
    ema = ExponentialMovingAverage(model, decay=args.decay)
    ema.register()

    optimizer.step()  # creates the moments outside the timed runs
    ema.update()
    ema_times: list[float] = []
    adamw_times: list[float] = []
    for _ in range(args.repeats):
        _time_into(ema.update, ema_times)
        _time_into(optimizer.step, adamw_times)
    ema_ms = 1e3 * statistics.median(ema_times)
    adamw_ms = 1e3 * statistics.median(adamw_times)
    results = {
        "layers": args.layers,
        "hidden": args.hidden,
        "parameters": n_params,
        "tensors": len(params),
        "repeats": args.repeats,
        "ema_update_ms": round(ema_ms, 3),
        "adamw_step_ms": round(adamw_ms, 3),
        "update_vs_adamw_ratio": round(ema_ms / adamw_ms, 4),
        "target_ratio": TARGET_RATIO,
    }
    print(
        f"EMA update vs AdamW step, {n_params / 1e6:.1f}M parameters in {len(params)} tensors "
        f"({args.layers} layers, hidden {args.hidden}), median of {args.repeats} interleaved runs: "
        f"update {ema_ms:.2f} ms, AdamW step {adamw_ms:.2f} ms, ratio {ema_ms / adamw_ms:.3f} "
        f"(target <= {TARGET_RATIO})"
    )
    return results


if __name__ == "__main__":
    main()
