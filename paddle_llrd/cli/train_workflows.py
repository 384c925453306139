"""PaddleFormers' CLI workflows run with paddle_llrd's trainers, for ``python -m paddle_llrd train``.

Importing PaddleFormers' workflow modules takes seconds (its DPO workflow
alone imports scikit-learn), so the command imports this module only once
the config has passed its checks (:mod:`paddle_llrd.cli.train`). It holds
the trainers that replace the CLI's (:class:`LLRDSFTTrainer` for
``SFT``/``PT``, :class:`LLRDDPOTrainer` for ``DPO``) and
:func:`run_tuner`, PaddleFormers' ``run_tuner`` with them and the arguments
class :class:`~paddle_llrd.cli.train_config.LLRDFinetuningArguments` in place for
the run.
"""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, Optional

from paddleformers.cli.hparams import parser as cli_parser
from paddleformers.cli.train import tuner as cli_tuner
from paddleformers.cli.train.dpo import workflow as dpo_workflow
from paddleformers.cli.train.dpo.dpo_trainer import DPOTrainer
from paddleformers.cli.train.sft import workflow as sft_workflow
from paddleformers.cli.train.sft.sft_trainer import SFTTrainer

from paddle_llrd.cli.train_config import train_arguments_classes
from paddle_llrd.cli.train_console import Console, ConsoleCallback
from paddle_llrd.integrations.paddleformers import LLRDTrainer
from paddle_llrd.integrations.trainer import with_framework_events

__all__ = ["LLRDDPOTrainer", "LLRDSFTTrainer", "llrd_classes", "run_tuner"]


class _ReportsToConsole:
    """A trainer that adds a :class:`~paddle_llrd.cli.train_console.ConsoleCallback`
    when its class has a :attr:`console` (what :func:`llrd_classes` gives it)."""

    #: Where the run's settings and progress go (``None``: PaddleFormers' own output only).
    console: Optional[Console] = None
    #: The console callback of this trainer, once built.
    console_callback: Optional[ConsoleCallback] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.console is not None:
            callback = with_framework_events(ConsoleCallback, self.callback_class)(self.console, self)
            type(self).console_callback = callback
            self.add_callback(callback)


class LLRDSFTTrainer(_ReportsToConsole, LLRDTrainer, SFTTrainer):
    """The CLI's ``SFTTrainer`` (its evaluation with generation, logging and
    PTQ hooks) training with :class:`paddle_llrd.AdamWDL` as :class:`LLRDTrainer` does."""


class LLRDDPOTrainer(_ReportsToConsole, LLRDTrainer, DPOTrainer):
    """The CLI's ``DPOTrainer`` (its reference model and preference losses)
    training with :class:`paddle_llrd.AdamWDL` as :class:`LLRDTrainer` does."""


@contextlib.contextmanager
def llrd_classes(console: Optional[Console] = None) -> Iterator[Dict[str, type]]:
    """PaddleFormers' workflows with paddle_llrd's arguments and trainer
    classes (the trainers reporting to ``console``, when given); the CLI's
    own classes are back afterwards, whatever happens. Yields the trainer
    classes in use, by the name they replace."""
    trainers = {
        "SFTTrainer": type("LLRDSFTTrainer", (LLRDSFTTrainer,), {"console": console}),
        "DPOTrainer": type("LLRDDPOTrainer", (LLRDDPOTrainer,), {"console": console}),
    }
    replaced = [
        (cli_parser, "_TRAIN_ARGS", train_arguments_classes()),
        (sft_workflow, "SFTTrainer", trainers["SFTTrainer"]),
        (dpo_workflow, "DPOTrainer", trainers["DPOTrainer"]),
    ]
    saved = [(module, name, getattr(module, name)) for module, name, _ in replaced]
    try:
        for module, name, value in replaced:
            setattr(module, name, value)
        yield trainers
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def run_tuner(config: Dict[str, Any], console: Optional[Console] = None) -> Optional[ConsoleCallback]:
    """PaddleFormers' ``run_tuner(config)`` with :func:`llrd_classes`; the
    console callback of the trainer it built (``None`` without ``console``)."""
    with llrd_classes(console) as trainers:
        cli_tuner.run_tuner(dict(config))
    return next((cls.console_callback for cls in trainers.values() if cls.console_callback is not None), None)
