"""How one ``AdamWDL.step()`` travels through the package: files entered, switches, calls.

Trains a small BERT-named model (``paddle_llrd.models.tiny_bert``, 2 blocks,
layer decay 0.8) for three steps and profiles the fourth with
``sys.setprofile``, keeping only the package's own Python calls, in call
order. For each configuration it reports the package files the step entered,
the switches between files (consecutive calls in different files), the
switches per parameter and the number of calls:

- ``multi_tensor``: the default step (the multi-tensor path);
- ``per_parameter``: ``use_multi_tensor=False``;
- ``clipped``: ``grad_clip=paddle.nn.ClipGradByGlobalNorm(1.0)``, as the
  Trainers configure it.

It also counts, in the package's source, the reads of an optimizer's private
attributes (``optimizer._x``, ``opt._x``) outside the module that defines
``AdamWDL`` (``optim/adamwdl.py``): the update paths take what they need as
arguments. ``python benchmarks/profile_step.py`` prints a table; ``--json``
prints the figures as JSON (``tests/test_step_structure.py`` reads them).
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from pathlib import Path
from typing import Any

import paddle

PACKAGE = Path(__file__).resolve().parents[1] / "paddle_llrd"
DEFINING_MODULE = PACKAGE / "optim" / "adamwdl.py"
CONFIGS = ("multi_tensor", "per_parameter", "clipped")
OPTIMIZER_NAMES = {"optimizer", "opt"}


def build(config: str) -> tuple[Any, Any, int]:
    """The model, its AdamWDL for ``config`` and its number of parameters."""
    from paddle_llrd import AdamWDL
    from paddle_llrd.models.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification

    paddle.seed(0)
    model = TinyBertForSequenceClassification(TinyBertConfig(num_hidden_layers=2))
    options: dict[str, Any] = {}
    if config == "per_parameter":
        options["use_multi_tensor"] = False
    elif config == "clipped":
        options["grad_clip"] = paddle.nn.ClipGradByGlobalNorm(1.0)
    optimizer = AdamWDL(learning_rate=1e-3, parameters=model.parameters(), weight_decay=0.01,
                        layerwise_decay=0.8, n_layers=2, name_dict={p.name: n for n, p in model.named_parameters()},
                        apply_decay_param_fun=lambda name: not name.endswith(".b_0"), **options)
    return model, optimizer, len(model.parameters())


def profile(config: str) -> dict[str, Any]:
    """The package calls of the 4th ``step()`` of ``config``."""
    model, optimizer, n_params = build(config)
    ids, labels = paddle.randint(0, 100, [8, 16]), paddle.randint(0, 2, [8])
    package = str(PACKAGE)
    calls: list[str] = []

    def record(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(package):
            calls.append(os.path.relpath(frame.f_code.co_filename, package))

    for step in range(4):
        paddle.nn.functional.cross_entropy(model(ids), labels).backward()
        if step == 3:
            sys.setprofile(record)
        optimizer.step()
        sys.setprofile(None)
        optimizer.clear_grad()
    switches = sum(1 for before, after in zip(calls, calls[1:]) if before != after)
    return {
        "path": optimizer.last_update_path.path,
        "files": sorted(set(calls)),
        "switches": switches,
        "switches_per_parameter": switches / n_params,
        "calls": len(calls),
        "parameters": n_params,
    }


def private_reads() -> dict[str, int]:
    """Per module (other than ``optim/adamwdl.py``), the reads of ``optimizer._x``/``opt._x``."""
    counts = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == DEFINING_MODULE:
            continue
        found = sum(
            1 for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
            and isinstance(node.value, ast.Name) and node.value.id in OPTIMIZER_NAMES
        )
        if found:
            counts[str(path.relative_to(PACKAGE))] = found
    return counts


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {config: profile(config) for config in CONFIGS}
    results["private_reads"] = private_reads()
    if args.json:
        print(json.dumps(results, indent=1))
        return results
    print(f"{'configuration':<15}{'path':<15}{'files':>6}{'switches':>10}{'per param':>11}{'calls':>7}")
    for config in CONFIGS:
        r = results[config]
        print(f"{config:<15}{r['path']:<15}{len(r['files']):>6}{r['switches']:>10}"
              f"{r['switches_per_parameter']:>11.2f}{r['calls']:>7}   {', '.join(r['files'])}")
    reads = results["private_reads"]
    print(f"private optimizer attributes read outside optim/adamwdl.py: {sum(reads.values())} {reads}")
    return results


if __name__ == "__main__":
    main()
