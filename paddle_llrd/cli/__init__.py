"""Command line: ``python -m paddle_llrd {demo,schedules,lr-table,train,tiny-llama,build-operator} [flags]``.

Each command is a module of this package that owns its flags and has a
``main(argv) -> int``; this module only dispatches, so ``python -m
paddle_llrd demo --help`` shows the demo's flags. Without a command (or with
an unknown one) it prints the commands and exits with status 2, as argparse
does for a missing argument; a command whose framework does not import (``train``
without PaddleFormers) says in one line what to install, also with status 2.
A warning of the package prints as one line, ``warning (Class): message``, as
``train``'s console prints it: a command's user has no use for the line of
the package (or of Python's ``runpy``) that it would otherwise be attributed
to. ``train`` shows them so itself (and writes them to its run's log in
Python's format). A new command is a module here plus its line in
:data:`COMMANDS`.
"""
from __future__ import annotations

import contextlib
import importlib
import sys
import warnings
from typing import Iterator

from paddle_llrd.checks import did_you_mean
from paddle_llrd.warning_classes import LLRDWarning

#: Each command's module and its one-line summary.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("paddle_llrd.cli.demo", "pretrain a small ViT on digits, fine-tune it with AdamW and with AdamWDL, compare"),
    "schedules": ("paddle_llrd.cli.schedules",
                  "print every registered schedule at characteristic steps, plot them in schedules_output/"),
    "lr-table": ("paddle_llrd.cli.lr_table", "print each parameter's layer, ratio and effective lr"),
    "train": ("paddle_llrd.cli.train",
              "run a paddleformers-cli train config (SFT, LoRA, PT, DPO) with LLRDTrainer (needs PaddleFormers)"),
    "tiny-llama": ("paddle_llrd.cli.tiny_llama",
                   "write a small random LLaMA and a few lines of data to try train with (needs PaddleFormers)"),
    "build-operator": ("paddle_llrd.cli.build_operator",
                       "build the fused AdamW operator now (else the first step builds it), say so in one line"),
}

PROG = "python -m paddle_llrd"
#: The commands that show the package's warnings themselves (train's console and log, cli/train_console.py).
SHOW_THEIR_OWN_WARNINGS = frozenset({"train"})


def _usage() -> str:
    lines = [f"usage: {PROG} COMMAND [flags]", "", "commands:"]
    lines += [f"  {name:<10} {summary}" for name, (_, summary) in COMMANDS.items()]
    lines += ["", f"{PROG} COMMAND --help shows a command's flags."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run ``argv[0]``'s command with the rest of ``argv``; its exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    if not argv:  # a usage error, as argparse's for a missing argument
        print(f"{_usage()}\n\n{PROG}: error: a COMMAND is required", file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"{_usage()}\n\n{PROG}: error: unknown command {command!r}."
              f"{did_you_mean(command, COMMANDS)}", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(COMMANDS[command][0])
    except ImportError as exc:
        if (exc.name or "").startswith("paddle_llrd"):  # a module of this package: a bug, not a missing framework
            raise
        print(f"{PROG} {command}: error: {exc}", file=sys.stderr)
        return 2
    if command in SHOW_THEIR_OWN_WARNINGS:
        return module.main(rest) or 0
    with _package_warnings_as_lines():
        return module.main(rest) or 0


@contextlib.contextmanager
def _package_warnings_as_lines() -> Iterator[None]:
    """Inside the block, each :class:`~paddle_llrd.LLRDWarning` is shown as ``warning (Class): message`` on
    stderr; every other warning as Python shows it."""
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, LLRDWarning):
            print(f"warning ({category.__name__}): {message}", file=sys.stderr if file is None else file)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown
