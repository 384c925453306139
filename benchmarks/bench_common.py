"""What the benchmark scripts share: the two regimes' models, their flags and
lenient parsing (``run_all.py`` passes every benchmark the same flags).

Two regimes:

* ``bert-base``: BERT-base's shapes (few large tensors; the kernels' memory
  traffic dominates), ``--layers`` x ``--hidden``;
* ``small-params``: ``--small-params`` tensors of ``Linear(16, 16)`` layers
  spread over 12 encoder layers (many small tensors, as in small models,
  adapters and heads; the optimizer's per-parameter Python dominates).
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from paddle import nn

from paddle_llrd.models.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification

REGIMES = ("bert-base", "small-params")
SMALL_PARAMS_LAYERS = 12


def model_size_parser(description: str) -> argparse.ArgumentParser:
    """A parser with ``--regime``, ``--layers``, ``--hidden`` and ``--small-params``."""
    base = TinyBertConfig.bert_base()
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--regime", choices=REGIMES, default="bert-base", help="the model (default bert-base)")
    parser.add_argument("--layers", type=int, default=base.num_hidden_layers, help="bert-base: encoder layers (default 12)")
    parser.add_argument("--hidden", type=int, default=base.hidden_size, help="bert-base: hidden size (default 768)")
    parser.add_argument(
        "--small-params", type=int, default=1536,
        help="small-params: parameter tensors, a weight and a bias per Linear(16, 16) (default 1536)",
    )
    return parser


def parse_lenient(parser: argparse.ArgumentParser, argv: list[str], benchmark: str, counts: tuple[str, ...]) -> argparse.Namespace:
    """Parse ``argv``, ignoring (and saying so) flags meant for other
    benchmarks; every flag named in ``counts`` (and ``--small-params``) must be >= 1."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        print(f"{benchmark}: ignoring {unknown}")
    bad = [name for name in counts + ("small_params",) if getattr(args, name) < 1]
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
