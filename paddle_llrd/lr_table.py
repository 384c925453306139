"""``python -m paddle_llrd lr-table``: what each parameter will learn with.

Prints, for a model, every parameter's structured name, its layer, the ratio
:func:`paddle_llrd.layerwise_lr_decay` gives it, and its effective learning
rate ``lr * ratio`` — the check to make before a long run. The model is a
PaddleNLP-style BERT built in (``--layers N``) or a user's factory
(``--model package.module:factory``, called without arguments).

Example:
    >>> from paddle_llrd.lr_table import main
    >>> main(["--layers", "2", "--decay", "0.5", "--learning-rate", "1.0"])  # doctest: +ELLIPSIS
    structured name ...
    bert.embeddings.word_embeddings.weight ... embeddings ... 0.125 ... 0.125
    ...
    bert.encoder.layers.1.norm2.bias ... 1 ... 0.5 ... 0.5
    ...
    classifier.bias ... head ... 1 ... 1
    0
"""
from __future__ import annotations

import argparse
import importlib
import re

from paddle import nn

from .layerwise import layerwise_lr_decay
from .tiny_bert import TinyBertConfig, TinyBertForSequenceClassification

_LAYER_INDEX = re.compile(r"encoder\.layers\.(\d+)\.")


def load_factory(spec: str):
    """Resolve ``"package.module:factory"`` to the callable it names."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--model must look like 'package.module:factory', got {spec!r}")
    factory = getattr(importlib.import_module(module_name), attr, None)
    if not callable(factory):
        raise ValueError(f"--model: {module_name!r} has no callable named {attr!r}")
    return factory


def layer_of(structured_name: str) -> str:
    """The layer a parameter belongs to, as ``layerwise_lr_decay`` sees it."""
    match = _LAYER_INDEX.search(structured_name)
    if match:
        return match.group(1)
    return "embeddings" if "embedding" in structured_name else "head"


def lr_rows(model: nn.Layer, decay: float, n_layers: int, learning_rate: float) -> list[tuple[str, str, float, float]]:
    """``(structured name, layer, ratio, effective lr)`` for every parameter."""
    name_dict = {p.name: n for n, p in model.named_parameters()}
    rows = []
    for structured, param in model.named_parameters():
        ratio = layerwise_lr_decay(decay, name_dict, n_layers, param)
        rows.append((structured, layer_of(structured), ratio, learning_rate * ratio))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m paddle_llrd lr-table", description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--layers", type=int, default=12, help="layers of the built-in PaddleNLP-style BERT (default 12)")
    source.add_argument("--model", help="'package.module:factory' returning a paddle.nn.Layer")
    parser.add_argument("--n-layers", type=int, help="n_layers for the decay (default: counted from the names)")
    parser.add_argument("--decay", type=float, default=0.8, help="layer-wise decay rate (default 0.8)")
    parser.add_argument("--learning-rate", type=float, default=5e-5, help="base learning rate (default 5e-5)")
    args = parser.parse_args(argv)

    if args.model:
        model = load_factory(args.model)()
    else:
        if args.layers < 1:
            parser.error("--layers must be >= 1")
        model = TinyBertForSequenceClassification(TinyBertConfig(num_hidden_layers=args.layers, hidden_size=16, num_attention_heads=2, intermediate_size=16))
    n_layers = args.n_layers
    if n_layers is None:
        indices = [int(m.group(1)) for n, _ in model.named_parameters() if (m := _LAYER_INDEX.search(n))]
        n_layers = max(indices) + 1 if indices else 0
    rows = lr_rows(model, args.decay, n_layers, args.learning_rate)
    width = max([len("structured name")] + [len(r[0]) for r in rows])
    print(f"{'structured name':<{width}}  {'layer':>10}  {'ratio':>10}  {'effective lr':>12}")
    for name, layer, ratio, lr in rows:
        print(f"{name:<{width}}  {layer:>10}  {ratio:>10.4g}  {lr:>12.4g}")
    print(f"({len(rows)} parameters, n_layers={n_layers}, decay={args.decay}, learning rate={args.learning_rate})")
    return 0
