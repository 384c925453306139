"""``python -m paddle_llrd lr-table``: what each parameter will learn with.

Builds :class:`~paddle_llrd.AdamWDL` for a model (a tiny built-in stack
named like a family, ``--arch``, or a user's factory, ``--model
package.module:factory``) and prints its
:meth:`~paddle_llrd.AdamWDL.param_lr_table` by layer group (the groups named
as the Trainer's logs name them, :mod:`paddle_llrd.layer_decay.group_names`):
one line per group by default, ``--style params`` a line per parameter too;
``--style groups`` prints instead the groups of
:func:`~paddle_llrd.layer_decay_param_groups`. Both styles read the blocks
with :func:`~paddle_llrd.layer_decay.layer_maps.resolve_layer_map`
(``--pattern``, else ``--family``). A bad flag is a one-line usage error
(exit status 2) naming it. The flags and the table are described in
:doc:`/layer_maps` ("The table for each family").

Example:
    >>> from paddle_llrd.cli.lr_table import main
    >>> main(["--layers", "2", "--decay", "0.5", "--learning-rate", "1.0"])
    group       ratio  effective lr  parameters  names
    embeddings  0.125         0.125           5  bert.embeddings.*
    layer_0      0.25          0.25          16  bert.encoder.layers.0.*
    layer_1       0.5           0.5          16  bert.encoder.layers.1.*
    head            1             1           4  bert.pooler.dense.weight .. classifier.bias
    (41 parameters, n_layers=2, decay=0.5, learning rate=1.0)
    0
    >>> main(["--layers", "2", "--decay", "0.5", "--learning-rate", "1.0", "--style", "params"])  # doctest: +ELLIPSIS
    group: prefix / name ...
    embeddings: bert.embeddings.
      word_embeddings.weight 0.125 0.125 yes 0.01
    ...
    layer_1: bert.encoder.layers.1.
    ...
      norm2.bias 0.5 0.5 no 0
    head:
    ...
      classifier.bias 1 1 no 0
    (41 parameters, n_layers=2, decay=0.5, learning rate=1.0)
    0
    >>> main(["--arch", "vit", "--layers", "1", "--decay", "0.5",
    ...       "--learning-rate", "1.0", "--style", "groups"])
    layer  lr factor  effective lr  weight decay  tensors  elements  parameters
        0       0.25          0.25          0.01        1        48  patch_embed.proj.weight
        0       0.25          0.25             0        3        28  cls_token
                                                                     .. patch_embed.proj.bias
        1        0.5           0.5          0.01        2        32  blocks.0.self_attn.weight
                                                                     .. blocks.0.mlp.weight
        1        0.5           0.5             0        4        16  blocks.0.self_attn.bias
                                                                     .. blocks.0.norm.bias
        2          1             1          0.01        1        12  head.weight
        2          1             1             0        3        11  norm.weight
                                                                     .. head.bias
    (6 groups, 14 parameters, n_layers=1, decay=0.5, learning rate=1.0)
    0
"""
from __future__ import annotations

import argparse
import importlib

from paddle import nn

from paddle_llrd.layer_decay.layer_maps import block_regex_problem
from paddle_llrd.cli.argparse_types import finite_number, integer_at_least
from paddle_llrd.layer_decay.group_names import LayerGroupNames, layer_group_names
from paddle_llrd.layer_decay.layer_maps import (
    FAMILY_PATTERNS, LayerMap, build_name_dict, no_decay_parameter_names, resolve_layer_map)
from paddle_llrd.layer_decay.param_groups import format_param_groups_table, layer_decay_param_groups, param_groups_table
from paddle_llrd.models.skeletons import SKELETONS, build_skeleton, llama_for_lr_table
from paddle_llrd.optim.adamwdl import AdamWDL


def load_factory(spec: str):
    """Resolve ``"package.module:factory"`` to the callable it names.

    Raises:
        ValueError: ``spec`` is not of that form, the module cannot be
            imported, or it has no callable of that name (the message starts
            with ``--model``).
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--model must look like 'package.module:factory', got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"--model: cannot import module {module_name!r}: {exc}") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ValueError(f"--model: {module_name!r} has no callable named {attr!r}")
    return factory


_count = integer_at_least(1)


def _block_pattern(text: str) -> str:
    """``--pattern``: a regular expression with exactly one group (the block index), as ``layer_map`` takes it."""
    problem = block_regex_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r} {problem}")
    return text


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m paddle_llrd lr-table",
        description="What each parameter will learn with: the layer-wise lr ratios and effective learning rates "
                    "AdamWDL gives a built-in model (--arch) or yours (--model), by layer group.",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--arch", choices=sorted(SKELETONS), default="bert", help="built-in model family (default bert)")
    source.add_argument("--model", help="'package.module:factory' returning a paddle.nn.Layer")
    parser.add_argument(
        "--tie-word-embeddings", action=argparse.BooleanOptionalAction, default=None,
        help="--arch llama: the head is the embedding weight (PaddleFormers' default) or its own",
    )
    parser.add_argument("--layers", type=_count, default=12, help="blocks of the built-in model (default 12)")
    parser.add_argument("--n-layers", type=_count, help="n_layers for the decay (default: counted from the names)")
    parser.add_argument("--family", default="auto", choices=["auto", *FAMILY_PATTERNS], help="name patterns to use (default auto)")
    parser.add_argument("--pattern", type=_block_pattern,
                        help="regex whose one group is the block index (instead of --family)")
    parser.add_argument("--decay", type=finite_number(0.0, inclusive=False), default=0.8,
                        help="layer-wise decay rate, > 0 (default 0.8)")
    parser.add_argument("--learning-rate", type=finite_number(0.0, inclusive=True), default=5e-5,
                        help="base learning rate (default 5e-5)")
    parser.add_argument("--weight-decay", type=finite_number(0.0, inclusive=True), default=0.01,
                        help="weight decay (default 0.01)")
    parser.add_argument("--decay-all", action="store_true", help="weight-decay bias and norm parameters too (--style params)")
    parser.add_argument(
        "--style", choices=["layers", "params", "groups"], default="layers",
        help="layers: one line per layer group (default); params: also one line per parameter, with its weight "
        "decay, as AdamWDL sees it; groups: one line per parameter group of layer_decay_param_groups, for any "
        "Paddle optimizer",
    )
    return parser


def _model(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[nn.Layer, str]:
    """The model to show, and what it is when that is worth saying (the LLaMA model or its stand-in)."""
    if args.tie_word_embeddings is not None and (args.model or args.arch != "llama"):
        parser.error("--tie-word-embeddings/--no-tie-word-embeddings apply to --arch llama only")
    if not args.model:
        if args.arch == "llama":
            # PaddleFormers' LlamaConfig ties the head by default
            return llama_for_lr_table(args.layers, args.tie_word_embeddings is not False)
        return build_skeleton(args.arch, args.layers), ""
    try:
        factory = load_factory(args.model)
    except ValueError as exc:
        parser.error(str(exc))
    model = factory()
    if not isinstance(model, nn.Layer):
        parser.error(f"--model: {args.model} returned {type(model).__name__}, not a paddle.nn.Layer")
    return model, ""


def _layer_map(parser: argparse.ArgumentParser, args: argparse.Namespace, model: nn.Layer) -> LayerMap:
    """The map both styles use (resolve_layer_map, as layer_decay_param_groups and the Trainer resolve it)."""
    try:
        return resolve_layer_map(args.pattern or args.family, model, n_layers=args.n_layers)
    except ValueError as exc:
        flags = "--pattern" if args.pattern else "--family"
        if args.n_layers is not None:
            flags += "/--n-layers"
        parser.error(f"{flags}: {exc}")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.style != "params" and args.decay_all:
        parser.error("--decay-all applies to --style params only")
    model, source = _model(parser, args)
    layer_map = _layer_map(parser, args, model)
    if args.style == "groups":
        return _print_groups(model, layer_map, args)
    name_dict = build_name_dict(model)
    no_decay = set() if args.decay_all else no_decay_parameter_names(model)
    optimizer = AdamWDL(
        learning_rate=args.learning_rate,
        parameters=model.parameters(),
        weight_decay=args.weight_decay,
        apply_decay_param_fun=lambda param_name: param_name not in no_decay,
        layerwise_decay=args.decay,
        n_layers=layer_map.n_layers,
        set_param_lr_fun=layer_map,
        name_dict=name_dict,
    )
    rows = optimizer.param_lr_table()
    groups = layer_group_names(model, layer_map)
    print((format_layer_table if args.style == "layers" else format_param_lr_table)(rows, groups))
    for tie in groups.ties:
        print(tie)
    print(f"({len(rows)} parameters, n_layers={layer_map.n_layers}, decay={args.decay}, learning rate={args.learning_rate})")
    if source:
        print(f"model: {source}")
    return 0


def _common_prefix(names: list[str]) -> str:
    """The longest prefix ending in "." that all ``names`` share and none is left empty by."""
    parts = [name.split(".")[:-1] for name in names]
    shared = []
    for pieces in zip(*parts):
        if len(set(pieces)) > 1:
            break
        shared.append(pieces[0])
    return "".join(f"{piece}." for piece in shared)


def _group_runs(rows: list, groups: LayerGroupNames) -> list[tuple[str, list]]:
    """Consecutive rows of one layer group, with the group's name."""
    runs: list[tuple[str, list]] = []
    for row in rows:
        group = groups.of(row.layer_id)
        if not runs or runs[-1][0] != group:
            runs.append((group, []))
        runs[-1][1].append(row)
    return runs


def format_layer_table(rows: list, groups: LayerGroupNames) -> str:
    """``param_lr_table()``'s rows as one line per layer group: its ratio and
    effective lr, how many parameters it holds and their names (the prefix
    they share, else the first and the last)."""
    lines = [["group", "ratio", "effective lr", "parameters", "names"]]
    for group, members in _group_runs(rows, groups):
        prefix = _common_prefix([row.name for row in members])
        if len(members) == 1:
            names = members[0].name
        else:
            names = f"{prefix}*" if prefix else f"{members[0].name} .. {members[-1].name}"
        shown = {f"{row.ratio:.4g}" for row in members}
        ratio = shown.pop() if len(shown) == 1 else "mixed"
        lr = f"{members[0].lr:.4g}" if ratio != "mixed" else "mixed"
        lines.append([group, ratio, lr, str(len(members)), names])
    widths = [max(len(line[i]) for line in lines) for i in range(4)]
    return "\n".join(line[0].ljust(widths[0]) + "".join(f"  {cell:>{width}}" for cell, width in zip(line[1:4], widths[1:]))
                     + f"  {line[4]}" for line in lines)


def format_param_lr_table(rows: list, groups: LayerGroupNames) -> str:
    """``param_lr_table()``'s rows as text: a line per layer group, named as
    the Trainer's logs name it, with the prefix its parameters share, then a
    line per parameter (the rest of its structured name, its ratio, effective
    lr, whether it is weight-decayed and its weight decay), so that LLaMA's
    names fit 80 columns."""
    runs = _group_runs(rows, groups)
    prefixes = [_common_prefix([row.name for row in members]) for _, members in runs]
    cells = [
        [[row.name[len(prefix):], f"{row.ratio:.4g}", f"{row.lr:.4g}", "yes" if row.decayed else "no",
          f"{row.weight_decay:.4g}"] for row in members]
        for (_, members), prefix in zip(runs, prefixes)
    ]
    header = ["group: prefix / name", "ratio", "effective lr", "decayed", "weight decay"]
    flat = [line for run in cells for line in run]
    widths = [max([len(header[0]) - 2] + [len(line[0]) for line in flat])]
    widths += [max([len(title)] + [len(line[i]) for line in flat]) for i, title in enumerate(header) if i]
    text = [header[0].ljust(widths[0] + 2) + "".join(f"  {title:>{width}}" for title, width in zip(header[1:], widths[1:]))]
    for (group, _), prefix, run in zip(runs, prefixes, cells):
        text.append(f"{group}: {prefix}" if prefix else f"{group}:")
        for line in run:
            text.append("  " + line[0].ljust(widths[0]) + "".join(f"  {cell:>{width}}" for cell, width in zip(line[1:], widths[1:])))
    return "\n".join(text)


def _print_groups(model: nn.Layer, layer_map: LayerMap, args: argparse.Namespace) -> int:
    groups = layer_decay_param_groups(model, args.decay, weight_decay=args.weight_decay, layer_map=layer_map)
    rows = param_groups_table(groups, model, layer_map=layer_map)
    print(format_param_groups_table(rows, learning_rate=args.learning_rate))
    print(
        f"({len(rows)} groups, {sum(row.tensors for row in rows)} parameters, n_layers={layer_map.n_layers}, "
        f"decay={args.decay}, learning rate={args.learning_rate})"
    )
    return 0
