"""Where the commands that need PaddleFormers run, and what they say where it is missing.

``python -m paddle_llrd train`` and ``python -m paddle_llrd tiny-llama`` need
PaddleFormers 1.2.0 with pins (``numpy<=1.26.4``, ``pyarrow<26``) that the
main environment does not want; ``make train-env`` builds them in
``.venv-paddleformers`` (``scripts/integration_env.sh``, the environment
``make test-paddleformers`` tests in).
"""
from __future__ import annotations

import sys

__all__ = ["TRAIN_ENV_COMMAND", "TRAIN_ENV_PYTHON", "train_environment_error"]

#: The command that builds the environment the PaddleFormers commands run in, and its interpreter.
TRAIN_ENV_COMMAND, TRAIN_ENV_PYTHON = "make train-env", ".venv-paddleformers/bin/python"


def train_environment_error(command: str, cause: ImportError) -> ImportError:
    """The :class:`ImportError` of ``python -m paddle_llrd <command>`` where
    PaddleFormers does not import: the one command that builds its
    environment and the interpreter to run it with, then the first failure
    in ``cause``'s chain (the command line prints it after
    ``python -m paddle_llrd <command>: error:``).

    Examples:
        >>> print(train_environment_error("train", ModuleNotFoundError("No module named 'paddleformers'")))
        this command needs PaddleFormers 1.2.0 and its pinned dependencies, which are not in this Python (...). In a clone of paddle_llrd, `make train-env` builds them in .venv-paddleformers; then run `.venv-paddleformers/bin/python -m paddle_llrd train ...`. Elsewhere, install requirements-paddleformers.txt into a virtualenv of its own (its pins, numpy<=1.26.4 and pyarrow<26, do not belong in other environments). The import failed with: No module named 'paddleformers'
    """
    while isinstance(cause.__cause__ or cause.__context__, ImportError):  # the first failure, not a wrapper's advice
        cause = cause.__cause__ or cause.__context__
    return ImportError(
        f"this command needs PaddleFormers 1.2.0 and its pinned dependencies, which are not in "
        f"this Python ({sys.executable}). In a clone of paddle_llrd, `{TRAIN_ENV_COMMAND}` builds them in "
        f"{TRAIN_ENV_PYTHON.split('/')[0]}; then run `{TRAIN_ENV_PYTHON} -m paddle_llrd {command} ...`. "
        "Elsewhere, install requirements-paddleformers.txt into a virtualenv of its own (its pins, numpy<=1.26.4 "
        f"and pyarrow<26, do not belong in other environments). The import failed with: {cause}"
    )
