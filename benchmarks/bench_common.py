"""What the benchmark scripts share: the model-size flags and lenient parsing
(``run_all.py`` passes every benchmark the same flags)."""
from __future__ import annotations

import argparse

from paddle_llrd.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification


def model_size_parser(description: str) -> argparse.ArgumentParser:
    """A parser with ``--layers`` and ``--hidden`` (default: the BERT-base shape)."""
    base = TinyBertConfig.bert_base()
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--layers", type=int, default=base.num_hidden_layers, help="encoder layers (default: BERT-base's 12)")
    parser.add_argument("--hidden", type=int, default=base.hidden_size, help="hidden size (default: BERT-base's 768)")
    return parser


def parse_lenient(parser: argparse.ArgumentParser, argv: list[str], benchmark: str, counts: tuple[str, ...]) -> argparse.Namespace:
    """Parse ``argv``, ignoring (and saying so) flags meant for other
    benchmarks; every flag named in ``counts`` must be >= 1."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        print(f"{benchmark}: ignoring {unknown}")
    bad = [name for name in counts if getattr(args, name) < 1]
    if bad:
        parser.error(", ".join(f"--{name}" for name in bad) + " must be >= 1")
    return args


def bert_base_shaped_model(args: argparse.Namespace) -> TinyBertForSequenceClassification:
    """The benchmarked model: BERT-base's proportions at ``--layers`` x ``--hidden``."""
    return TinyBertForSequenceClassification(
        TinyBertConfig.bert_base(num_hidden_layers=args.layers, hidden_size=args.hidden)
    )
