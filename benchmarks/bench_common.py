"""What the benchmark scripts share: the two regimes' models, their flags and
lenient parsing (``run_all.py`` passes every benchmark the same flags), the
optimizers of the training-loop and memory benchmarks with or without the
gradient clipping users run, and the record of AdamWDL's update paths.

Two regimes:

* ``bert-base``: BERT-base's shapes (few large tensors; the kernels' memory
  traffic dominates), ``--layers`` x ``--hidden``;
* ``small-params``: ``--small-params`` tensors of ``Linear(16, 16)`` layers
  spread over 12 encoder layers (many small tensors, as in small models,
  adapters and heads; the optimizer's per-parameter Python dominates).
"""
from __future__ import annotations

import argparse
import collections
import math
import time
from typing import Any

import numpy as np
import paddle
from paddle import nn

from paddle_llrd import AdamWDL
from paddle_llrd.models.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification

REGIMES = ("bert-base", "small-params")
SMALL_PARAMS_LAYERS = 12
# The gradient clipping users run: PaddleNLP's and PaddleFormers' Trainers pass
# grad_clip=paddle.nn.ClipGradByGlobalNorm(max_grad_norm) to the optimizer, and
# their TrainingArguments' max_grad_norm defaults to 1.0.
MAX_GRAD_NORM = 1.0
CLIP_DESCRIPTION = f"ClipGradByGlobalNorm({MAX_GRAD_NORM})"
# AdamWDL's update paths as its last_update_path names them, and as the docs do (docs/adamwdl.rst).
PATH_NAMES = {"fused": "fused operator", "multi_tensor": "multi-tensor path (Paddle's kernels)",
              "per_parameter": "per-parameter path"}


def add_bert_base_size(parser: argparse.ArgumentParser) -> None:
    """``--layers`` and ``--hidden``: the bert-base regime's size (BERT-base's by default)."""
    base = TinyBertConfig.bert_base()
    parser.add_argument("--layers", type=int, default=base.num_hidden_layers, help="bert-base: encoder layers (default 12)")
    parser.add_argument("--hidden", type=int, default=base.hidden_size, help="bert-base: hidden size (default 768)")


def add_clip_flag(parser: argparse.ArgumentParser) -> None:
    """``--clip``: every optimizer of the benchmark clips, as the Trainers users run do."""
    parser.add_argument(
        "--clip", action="store_true",
        help=f"grad_clip=paddle.nn.ClipGradByGlobalNorm({MAX_GRAD_NORM}) for every optimizer, AdamW included "
        "(what PaddleNLP's and PaddleFormers' Trainers pass; default: no clipping)",
    )


def model_size_parser(description: str) -> argparse.ArgumentParser:
    """A parser with ``--regime``, ``--layers``, ``--hidden`` and ``--small-params``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--regime", choices=REGIMES, default="bert-base", help="the model (default bert-base)")
    add_bert_base_size(parser)
    parser.add_argument(
        "--small-params", type=int, default=1536,
        help="small-params: parameter tensors, a weight and a bias per Linear(16, 16) (default 1536)",
    )
    return parser


def parse_lenient(parser: argparse.ArgumentParser, argv: list[str], benchmark: str, counts: tuple[str, ...]) -> argparse.Namespace:
    """Parse ``argv``, ignoring (and saying so) flags meant for other
    benchmarks; every flag named in ``counts`` (and ``--small-params``, where the parser has it) must be >= 1."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        print(f"{benchmark}: ignoring {unknown}")
    bad = [name for name in counts + ("small_params",) if getattr(args, name, 1) < 1]
    if bad:
        parser.error(", ".join(f"--{name.replace('_', '-')}" for name in bad) + " must be >= 1")
    return args


def bert_base_shaped_model(args: argparse.Namespace) -> TinyBertForSequenceClassification:
    """The bert-base regime's model: BERT-base's proportions at ``--layers`` x ``--hidden``."""
    return TinyBertForSequenceClassification(
        TinyBertConfig.bert_base(num_hidden_layers=args.layers, hidden_size=args.hidden)
    )


class _Block(nn.Layer):
    def __init__(self, linears: int) -> None:
        super().__init__()
        self.linears = nn.LayerList([nn.Linear(16, 16) for _ in range(linears)])


class SmallParamsModel(nn.Layer):
    """``encoder.layers.i.linears.j``: Linear(16, 16) layers in :data:`SMALL_PARAMS_LAYERS` blocks."""

    def __init__(self, linears: int) -> None:
        super().__init__()
        self.encoder = nn.Layer()
        per_layer = [linears // SMALL_PARAMS_LAYERS + (i < linears % SMALL_PARAMS_LAYERS) for i in range(SMALL_PARAMS_LAYERS)]
        self.encoder.layers = nn.LayerList([_Block(n) for n in per_layer])


def benchmark_model(args: argparse.Namespace) -> tuple[nn.Layer, int]:
    """The model of ``args.regime`` and its number of encoder layers (AdamWDL's ``n_layers``)."""
    if args.regime == "small-params":
        return SmallParamsModel(max(1, args.small_params // 2)), SMALL_PARAMS_LAYERS
    return bert_base_shaped_model(args), args.layers


def describe(args: argparse.Namespace, tensors: int, elements: int) -> str:
    if args.regime == "small-params":
        return f"small-params: {tensors} tensors of Linear(16, 16), {SMALL_PARAMS_LAYERS} layers"
    return f"bert-base: {args.layers} layers, hidden {args.hidden}, {elements / 1e6:.1f}M parameters in {tensors} tensors"


def synthetic_backward(params: list[Any]) -> None:
    """A backward without a forward: ``0.01 * sum`` of every parameter, so each
    gets a dense gradient of 0.01 per element. The optimizers' work depends on
    the gradients' shapes, not on a model's activations, which a forward would
    add to the time and memory of both sides alike."""
    paddle.add_n([(p * 0.01).sum() for p in params]).backward()


def gradient_global_norm(params: list[Any]) -> float:
    """The global L2 norm of the parameters' gradients now (in float64), as
    ``ClipGradByGlobalNorm`` computes it: above :data:`MAX_GRAD_NORM`, the clip scales them down."""
    return math.sqrt(sum(float((p.grad.astype("float64") ** 2).sum()) for p in params if p.grad is not None))


def training_optimizer(
    kind: str, model: nn.Layer, n_layers: int, *, clip: bool, layerwise_decay: float = 0.9,
    use_multi_tensor: bool | None = None, num_threads: int | None = None,
) -> paddle.optimizer.Optimizer:
    """``paddle.optimizer.AdamW`` (``kind="adamw"``) or ``AdamWDL`` (``"adamwdl"``)
    over ``model``'s trained parameters as the training-loop and memory
    benchmarks build them: lr 1e-4, weight decay 0.01 except on biases,
    ``ClipGradByGlobalNorm(MAX_GRAD_NORM)`` when ``clip``; AdamWDL with
    ``layerwise_decay`` over ``n_layers`` layers by the parameters' structured
    names, ``use_multi_tensor`` and ``num_threads`` as given."""
    params = [p for p in model.parameters() if not p.stop_gradient]
    common = dict(
        learning_rate=1e-4, parameters=params, weight_decay=0.01,
        apply_decay_param_fun=lambda n: not n.endswith(".b_0"),
        grad_clip=paddle.nn.ClipGradByGlobalNorm(MAX_GRAD_NORM) if clip else None,
    )
    if kind == "adamw":
        return paddle.optimizer.AdamW(**common)
    if kind != "adamwdl":
        raise ValueError(f"no optimizer {kind!r}: 'adamw' or 'adamwdl'")
    return AdamWDL(
        **common, layerwise_decay=layerwise_decay, n_layers=n_layers,
        name_dict={p.name: n for n, p in model.named_parameters()},
        use_multi_tensor=use_multi_tensor, num_threads=num_threads,
    )


def grad_clip_name(optimizer: paddle.optimizer.Optimizer) -> str | None:
    """The class name of the gradient clipping ``optimizer`` holds (None: none).

    Read back from the optimizer (Paddle keeps it as ``_grad_clip``; no public
    accessor exists), so that a result says what the timed steps ran with, not
    what a flag asked for."""
    clip = getattr(optimizer, "_grad_clip", None)
    return None if clip is None else type(clip).__name__


class PathTally:
    """Which update path an AdamWDL's steps took: :meth:`record` after each step.

    Reads the optimizer's ``last_update_path`` (a ``(path, reason)`` named tuple:
    ``"multi_tensor"`` with reason None, or ``"per_parameter"`` and why). An
    AdamWDL without that property leaves the tally unreported (:meth:`summary`
    None) rather than guessed from its internals.
    """

    def __init__(self) -> None:
        self.paths: collections.Counter[str] = collections.Counter()
        self.reasons: collections.Counter[str] = collections.Counter()
        self.reported = True

    def record(self, optimizer: Any) -> None:
        last = getattr(optimizer, "last_update_path", None)
        if last is None:
            self.reported = False
            return
        path, reason = last
        self.paths[path] += 1
        if reason is not None:
            self.reasons[str(reason)] += 1

    def summary(self) -> dict[str, Any] | None:
        """``{"steps", "multi_tensor", "per_parameter", "reasons"}`` (counts of
        steps; the reasons of the steps off the fused operator), or None where unreported."""
        if not self.reported:
            return None
        summary: dict[str, Any] = {"steps": sum(self.paths.values())}
        summary |= {path: self.paths[path] for path in PATH_NAMES}
        summary |= {path: count for path, count in self.paths.items() if path not in PATH_NAMES}
        summary["reasons"] = dict(self.reasons)
        return summary


def describe_paths(summary: dict[str, Any] | None) -> str:
    """A :meth:`PathTally.summary` in words, paths named as the docs name them."""
    if summary is None:
        return "path not reported (no last_update_path)"
    taken = [
        f"{PATH_NAMES.get(path, path)} in {count} of {summary['steps']} steps"
        for path, count in summary.items() if path not in ("steps", "reasons") and count
    ]
    reasons = "; ".join(summary["reasons"])
    return ", ".join(taken) + (f" ({reasons})" if reasons else "")


def describe_norms(results: dict[str, Any]) -> str:
    """The clip's squared norms as ``bench_training_loop.py --clip`` measures them (``norms_ms``,
    ``norms_gbs``, ``paddle_norms_ms``), in words."""
    return (f"the clip's squared norms alone {results['norms_ms']:.2f} ms, {results['norms_gbs']:.1f} GB/s; "
            f"Paddle's squared_l2_norm per gradient and their sum {results['paddle_norms_ms']:.2f} ms")


# Bytes an AdamW step moves per float32 parameter: reads the parameter, its
# gradient and both moments, writes the parameter and both moments (7 x 4).
ADAMW_BYTES_PER_PARAMETER = 28


def measured_bandwidth_gbs(threads: int = 1, megabytes: int = 256, repeats: int = 5) -> float:
    """The memory bandwidth this process gets now, in GB/s: the best of ``repeats``
    NumPy copies of a ``megabytes`` buffer split into ``threads`` contiguous
    parts copied at once (NumPy releases the GIL while it copies), counting the
    bytes read and written."""
    from concurrent.futures import ThreadPoolExecutor

    source = np.ones(megabytes * (1 << 20) // 8)
    target = np.empty_like(source)
    edges = np.linspace(0, source.size, threads + 1).astype(int)
    parts = [(target[a:b], source[a:b]) for a, b in zip(edges, edges[1:])]
    best = float("inf")
    with ThreadPoolExecutor(max(1, threads - 1)) as pool:
        for _ in range(repeats):
            start = time.perf_counter()
            futures = [pool.submit(np.copyto, *part) for part in parts[1:]]
            np.copyto(*parts[0])
            for future in futures:
                future.result()
            best = min(best, time.perf_counter() - start)
    return 2 * source.nbytes / best / 1e9


# The settling allocations: this many bytes each (over glibc's 1 KiB
# large-request threshold), until one takes less than SETTLED_S, at most
# SETTLE_LIMIT of them.
SETTLE_BYTES = 4096
SETTLED_S = 20e-6
SETTLE_LIMIT = 256


def settle_freed_memory() -> int:
    """Pay, before a timer starts, the work glibc's ``malloc`` has left from the frees before it.

    glibc puts freed chunks in an unsorted list and sorts them into its bins
    at the next request of 1 KiB or more, at most 10,000 per request. After
    a backward that freed thousands of tensors, whatever asks first pays:
    right after this benchmark's small-params backward, one ``bytearray(1100)``
    took 0.66 ms and one ``bytearray(600)`` 0.016 ms (``perf``: the time is
    in ``_int_malloc``). That work belongs to the backward, not to the
    optimizer step timed next, which pays it only because it asks first.
    This allocates and frees blocks of :data:`SETTLE_BYTES` until one is
    fast, and returns how many it took (elsewhere than glibc: 1, harmless).
    """
    for count in range(1, SETTLE_LIMIT + 1):
        start = time.perf_counter()
        bytearray(SETTLE_BYTES)
        if time.perf_counter() - start < SETTLED_S:
            return count
    return SETTLE_LIMIT
