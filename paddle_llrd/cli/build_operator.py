"""``python -m paddle_llrd build-operator``: build the fused operator now (or find it built), in one line.

``make install`` runs it; without it the first ``AdamWDL.step()`` that wants the
operator builds it. Either way it is kept per machine, Paddle and Python
(:mod:`paddle_llrd.optim.fused_operator`, docs/installation.rst). Where it
cannot be built (no C++ compiler) the line says why and the status is still
0: AdamWDL then runs Paddle's kernels, with the same numbers.
"""
from __future__ import annotations

import argparse

from paddle_llrd.optim.fused_operator import build

PROG = "python -m paddle_llrd build-operator"


def main(argv: list[str] | None = None) -> int:
    """Build or find the operator, say so in one line; 0 whether or not it could be built."""
    argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0]).parse_args(argv)
    build(verbose=True)
    return 0
