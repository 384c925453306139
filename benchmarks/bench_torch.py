"""AdamWDL's step against PyTorch's fused CPU AdamW (``torch.optim.AdamW(fused=True)``) on
BERT-base shapes, one thread each, in one process: the peer a PyTorch user compares with.

Needs PyTorch beside Paddle (it is no dependency of paddle_llrd: run it in a virtualenv
of its own, ``pip install torch paddlepaddle -e .``); without it the script says so and
exits 0. Both optimizers update the same shapes (the BERT-base-shaped model's 201
tensors, 109.5M parameters, or ``--layers``/``--hidden``), with fresh gradients from a
backward before each round (untimed), and time ``step()`` and then the clearing of the
gradients, in rotating order, ``--steps`` rounds; with ``--clip``, PyTorch's
``clip_grad_norm_(max_norm=1.0)`` (foreach) against AdamWDL's
``grad_clip=paddle.nn.ClipGradByGlobalNorm(1.0)``. Printed: the medians, and the
median per-round ratio AdamWDL / PyTorch (lower: AdamWDL faster).

``--arithmetic avx512`` makes the fused operator compute as Paddle's generated
AVX-512 kernel does (float32, three fused multiply-adds), which is what AdamWDL
computes on a CPU with AVX-512: that step's speed, measured on a CPU without it
(where the numbers are then not ``paddle.optimizer.AdamW``'s bits; the default,
``paddle``, is the arithmetic Paddle's kernel runs on this CPU).

    python benchmarks/bench_torch.py                 # BERT-base, one thread each
    python benchmarks/bench_torch.py --clip --threads 2
    python benchmarks/bench_torch.py --arithmetic avx512
"""
from __future__ import annotations

import argparse
import inspect
import statistics
import sys
import time
from typing import Any

import paddle

from paddle_llrd import AdamWDL
from bench_common import add_clip_flag, bert_base_shaped_model, model_size_parser, parse_lenient, synthetic_backward


# The fused operator's arithmetic field: its layout's 4th header entry (csrc/fused_adamw.cc).
ARITHMETICS = {"paddle": 0, "avx512": 2}
_ARITHMETIC_FIELD = 3


def use_arithmetic(name: str) -> None:
    """Make every call of the fused operator by the multi-tensor step compute in ``name``'s arithmetic."""
    from paddle_llrd.optim import multi_tensor

    call, value = multi_tensor.fused_adamw, ARITHMETICS[name]
    signature = inspect.signature(call)

    def with_arithmetic(*arguments: Any, **keywords: Any) -> None:
        bound = signature.bind(*arguments, **keywords)
        layout = list(bound.arguments["layout"])
        layout[_ARITHMETIC_FIELD] = value
        bound.arguments["layout"] = layout
        call(*bound.args, **bound.kwargs)

    multi_tensor.fused_adamw = with_arithmetic


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = model_size_parser(__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="timed rounds (default 10)")
    parser.add_argument("--threads", type=int, default=1, help="threads of each optimizer (default 1)")
    parser.add_argument("--arithmetic", choices=ARITHMETICS, default="paddle",
                        help="the fused operator's arithmetic: Paddle's kernel's on this CPU (default), or its "
                             "generated AVX-512 kernel's (AdamWDL's step on an AVX-512 CPU)")
    add_clip_flag(parser)
    return parse_lenient(parser, argv, "bench_torch", counts=("steps", "layers", "hidden", "threads"))


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    args = _parse(list(sys.argv[1:] if argv is None else argv))
    try:
        import torch
    except ImportError:
        print("bench_torch: PyTorch is not installed here (it is no dependency of paddle_llrd); "
              "run it in a virtualenv with torch and paddlepaddle")
        return None
    torch.set_num_threads(args.threads)
    if args.arithmetic != "paddle":
        use_arithmetic(args.arithmetic)
    args.regime = "bert-base"
    paddle.seed(0)
    model = bert_base_shaped_model(args)
    params = [p for p in model.parameters() if not p.stop_gradient]
    ours = AdamWDL(1e-4, parameters=params, weight_decay=0.01, set_param_lr_fun=None, num_threads=args.threads,
                   grad_clip=paddle.nn.ClipGradByGlobalNorm(1.0) if args.clip else None)
    theirs_params = [torch.nn.Parameter(torch.from_numpy(p.numpy().copy())) for p in params]
    theirs = torch.optim.AdamW(theirs_params, lr=1e-4, weight_decay=0.01, fused=True)

    def torch_backward() -> None:
        (sum(p.sum() for p in theirs_params) * 0.01).backward()

    def torch_step() -> None:
        if args.clip:
            torch.nn.utils.clip_grad_norm_(theirs_params, 1.0, foreach=True)
        theirs.step()

    for _ in range(2):  # the state of both, untimed
        synthetic_backward(params)
        ours.step()
        ours.clear_grad()
        torch_backward()
        torch_step()
        theirs.zero_grad()
    times: dict[str, list[float]] = {"ours_step": [], "ours_clear": [], "torch_step": [], "torch_clear": []}
    for index in range(args.steps):
        order = ("ours", "torch") if index % 2 == 0 else ("torch", "ours")
        for name in order:
            if name == "ours":
                synthetic_backward(params)
                start = time.perf_counter()
                ours.step()
                middle = time.perf_counter()
                ours.clear_grad()
            else:
                torch_backward()
                start = time.perf_counter()
                torch_step()
                middle = time.perf_counter()
                theirs.zero_grad()
            end = time.perf_counter()
            times[f"{name}_step"].append(middle - start)
            times[f"{name}_clear"].append(end - middle)
    results = {key: 1e3 * statistics.median(values) for key, values in times.items()}
    results["step_ratio"] = statistics.median(a / b for a, b in zip(times["ours_step"], times["torch_step"]))
    results["loop_ratio"] = statistics.median(
        (a + c) / (b + d) for a, b, c, d in zip(times["ours_step"], times["torch_step"], times["ours_clear"],
                                                times["torch_clear"]))
    results["path"] = tuple(ours.last_update_path)
    arithmetic_note = ", AdamWDL in the arithmetic of Paddle's AVX-512 kernel" if args.arithmetic == "avx512" else ""
    print(
        f"AdamWDL against torch.optim.AdamW(fused=True), {sum(int(p.size) for p in params) / 1e6:.1f}M parameters in "
        f"{len(params)} tensors, {args.threads} thread(s) each, {'clipped (global norm 1.0)' if args.clip else 'no clip'}, "
        f"{args.steps} rounds (torch {torch.__version__}, Paddle {paddle.__version__}{arithmetic_note}):\n"
        f"  step:        AdamWDL {results['ours_step']:8.2f} ms  PyTorch {results['torch_step']:8.2f} ms  "
        f"ratio {results['step_ratio']:.3f}x\n"
        f"  + clearing:  AdamWDL {results['ours_clear']:8.2f} ms  PyTorch {results['torch_clear']:8.2f} ms  "
        f"ratio of the whole {results['loop_ratio']:.3f}x  (AdamWDL's path: {results['path']})"
    )
    return results


if __name__ == "__main__":
    main()
