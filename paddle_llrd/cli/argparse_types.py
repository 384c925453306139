"""Argument types that the package's command-line tools share.

``python -m paddle_llrd lr-table`` and ``python -m paddle_llrd schedules``
refuse a bad number the same way: argparse prints ``argument --decay:
expected a finite number > 0, got '0'`` and exits 2, with no traceback.
"""
from __future__ import annotations

import argparse
import math
from typing import Callable


def finite_number(minimum: float, *, inclusive: bool) -> Callable[[str], float]:
    """An argparse type: a finite float ``>= minimum`` (``> minimum`` unless ``inclusive``).

    Examples:
        >>> finite_number(0.0, inclusive=True)("5e-5")
        5e-05
        >>> finite_number(0.0, inclusive=False)("0")
        Traceback (most recent call last):
        argparse.ArgumentTypeError: expected a finite number > 0, got '0'
    """
    bound = f">= {minimum:g}" if inclusive else f"> {minimum:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value) or value < minimum or (value == minimum and not inclusive):
            raise argparse.ArgumentTypeError(f"expected a finite number {bound}, got {text!r}")
        return value

    return parse


def integer_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an int ``>= minimum``.

    Examples:
        >>> integer_at_least(1)("12")
        12
        >>> integer_at_least(1)("1.5")
        Traceback (most recent call last):
        argparse.ArgumentTypeError: expected an integer, got '1.5'
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return value

    return parse
