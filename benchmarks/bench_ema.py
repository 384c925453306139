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
from paddle_llrd.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification

TARGET_RATIO = 0.5


def _parse(argv: list[str]) -> argparse.Namespace:
    base = TinyBertConfig.bert_base()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=base.num_hidden_layers, help="encoder layers (default: BERT-base's 12)")
    parser.add_argument("--hidden", type=int, default=base.hidden_size, help="hidden size (default: BERT-base's 768)")
    parser.add_argument(
        "--repeats", "--steps", dest="repeats", type=int, default=15,
        help="timed repetitions of each operation (default 15; --steps as in bench_adamwdl.py)",
    )
    parser.add_argument("--decay", type=float, default=0.999, help="EMA decay (default 0.999)")
    # run_all.py passes every benchmark the same flags; ignore the ones meant for others
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        print(f"bench_ema: ignoring {unknown}")
    if args.repeats < 1 or args.layers < 1 or args.hidden < 1:
        parser.error("--repeats, --layers and --hidden must be positive")
    return args


def _time_into(function, timings: list[float]) -> None:
    start = time.perf_counter()
    function()
    timings.append(time.perf_counter() - start)


def main(argv: list[str] | None = None) -> dict:
    """Run the benchmark; returns the settings, medians (ms) and the ratio."""
    args = _parse(list(sys.argv[1:] if argv is None else argv))
    paddle.seed(0)
    config = TinyBertConfig.bert_base(num_hidden_layers=args.layers, hidden_size=args.hidden)
    model = TinyBertForSequenceClassification(config)
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
