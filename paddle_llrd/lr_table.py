"""``python -m paddle_llrd lr-table``: what each parameter will learn with.

Prints, for a model, every parameter's structured name, its layer id (a
:class:`~paddle_llrd.layer_maps.LayerMap`: 0 = embeddings, ``N + 1`` = block
``N``, ``n_layers + 1`` = heads and final norms), its ratio
``decay ** (n_layers + 1 - layer id)`` and its effective learning rate
``lr * ratio`` — the check to make before a long run. For BERT names the
ratios are exactly those of :func:`paddle_llrd.layerwise_lr_decay`.

The model is a tiny built-in stack named like a family (``--arch bert``,
PaddleNLP-style BERT, the default; ``gpt``, ``gpt2``, ``llama``, ``vit``) with
``--layers N`` blocks, or a user's factory (``--model package.module:factory``,
called without arguments).

Example:
    >>> from paddle_llrd.lr_table import main
    >>> main(["--layers", "2", "--decay", "0.5", "--learning-rate", "1.0"])  # doctest: +ELLIPSIS
    structured name ...
    bert.embeddings.word_embeddings.weight 0 0.125 0.125
    ...
    bert.encoder.layers.1.norm2.bias 2 0.5 0.5
    ...
    classifier.bias 3 1 1
    (41 parameters, n_layers=2, decay=0.5, learning rate=1.0)
    0
"""
from __future__ import annotations

import argparse
import importlib

from paddle import nn

from .layer_maps import FAMILY_PATTERNS, LayerMap
from .skeletons import SKELETONS, build_skeleton


def load_factory(spec: str):
    """Resolve ``"package.module:factory"`` to the callable it names."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--model must look like 'package.module:factory', got {spec!r}")
    factory = getattr(importlib.import_module(module_name), attr, None)
    if not callable(factory):
        raise ValueError(f"--model: {module_name!r} has no callable named {attr!r}")
    return factory


def lr_rows(model: nn.Layer, layer_map: LayerMap, decay: float, learning_rate: float) -> list[tuple[str, int, float, float]]:
    """``(structured name, layer id, ratio, effective lr)`` for every parameter."""
    return [(name, layer, ratio, learning_rate * ratio) for name, layer, ratio in layer_map.table(model, decay)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m paddle_llrd lr-table", description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--arch", choices=sorted(SKELETONS), default="bert", help="built-in model family (default bert)")
    source.add_argument("--model", help="'package.module:factory' returning a paddle.nn.Layer")
    parser.add_argument("--layers", type=int, default=12, help="blocks of the built-in model (default 12)")
    parser.add_argument("--n-layers", type=int, help="n_layers for the decay (default: counted from the names)")
    parser.add_argument("--family", default="auto", choices=["auto", *FAMILY_PATTERNS], help="name patterns to use (default auto)")
    parser.add_argument("--pattern", help="regex whose first group is the block index (instead of --family)")
    parser.add_argument("--decay", type=float, default=0.8, help="layer-wise decay rate (default 0.8)")
    parser.add_argument("--learning-rate", type=float, default=5e-5, help="base learning rate (default 5e-5)")
    args = parser.parse_args(argv)

    if args.model:
        model = load_factory(args.model)()
    else:
        if args.layers < 1:
            parser.error("--layers must be >= 1")
        model = build_skeleton(args.arch, args.layers)
    layer_map = LayerMap.from_model(model, n_layers=args.n_layers, family=args.family, pattern=args.pattern)
    rows = lr_rows(model, layer_map, args.decay, args.learning_rate)
    width = max([len("structured name")] + [len(r[0]) for r in rows])
    print(f"{'structured name':<{width}}  {'layer':>5}  {'ratio':>10}  {'effective lr':>12}")
    for name, layer, ratio, lr in rows:
        print(f"{name:<{width}}  {layer:>5}  {ratio:>10.4g}  {lr:>12.4g}")
    print(f"({len(rows)} parameters, n_layers={layer_map.n_layers}, decay={args.decay}, learning rate={args.learning_rate})")
    return 0
