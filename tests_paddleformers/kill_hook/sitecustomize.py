"""Test only: ``kill -9`` a run at a chosen moment, found among Python's audit events.

With this folder first on ``PYTHONPATH``, Python imports this module as it
starts, before the command runs; the command itself is run as written.
``LLRD_KILL_AT="EVENT PATTERN"`` sends this process SIGKILL (what
``kill -9`` sends) at the first audit event ``EVENT`` whose path matches
the regular expression ``PATTERN``, before the operation
happens: ``open`` (a file opened for writing), ``os.rename`` (also
``os.replace``), ``os.rmdir``, ... Without ``LLRD_KILL_AT`` nothing is done.
"""
from __future__ import annotations

import os
import re
import signal
import sys


def _paths(event: str, args: tuple) -> list:
    if event == "open":
        path, mode = args[0], args[1]
        written = isinstance(mode, str) and any(flag in mode for flag in "wax+")
        return [str(path)] if written and path is not None else []
    return [str(arg) for arg in args[:2] if isinstance(arg, (str, os.PathLike))]


def _install(kill_at: str) -> None:
    target, expression = kill_at.split(maxsplit=1)
    pattern = re.compile(expression)

    def hook(event: str, args: tuple) -> None:
        if event == target and any(pattern.search(path) for path in _paths(event, args)):
            os.kill(os.getpid(), signal.SIGKILL)

    sys.addaudithook(hook)


if os.environ.get("LLRD_KILL_AT"):
    _install(os.environ["LLRD_KILL_AT"])
