"""Command line: ``python -m paddle_llrd {demo,schedules,lr-table,train} [flags]``.

Each sub-command lives in its own module, which owns its flags; this file only
dispatches, so ``python -m paddle_llrd demo --help`` shows the demo's flags.
Without a command (or with an unknown one) it prints the commands and exits
with status 2, as argparse does for a missing argument.
"""
from __future__ import annotations

import importlib
import sys

from paddle_llrd.argument_checks import did_you_mean

COMMANDS = {
    "demo": ("paddle_llrd.demo", "pretrain a small ViT on digits, fine-tune it with AdamW and with AdamWDL, compare"),
    "schedules": ("paddle_llrd.cli.schedules", "print every registered schedule at characteristic steps"),
    "lr-table": ("paddle_llrd.layer_decay.lr_table", "print each parameter's layer, ratio and effective lr"),
    "train": ("paddle_llrd.integrations.paddleformers_cli",
              "run a paddleformers-cli train config (SFT, LoRA, PT, DPO) with LLRDTrainer (needs PaddleFormers)"),
}


def _usage() -> str:
    lines = ["usage: python -m paddle_llrd COMMAND [flags]", "", "commands:"]
    lines += [f"  {name:<10} {summary}" for name, (_, summary) in COMMANDS.items()]
    lines += ["", "python -m paddle_llrd COMMAND --help shows a command's flags."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    if not argv:  # a usage error, as argparse's for a missing argument
        print(f"{_usage()}\n\npython -m paddle_llrd: error: a COMMAND is required", file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"{_usage()}\n\npython -m paddle_llrd: error: unknown command {command!r}."
              f"{did_you_mean(command, COMMANDS)}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[command][0])
    return module.main(rest) or 0


if __name__ == "__main__":
    sys.exit(main())
