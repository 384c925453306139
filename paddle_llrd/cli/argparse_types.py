"""Argument types that the package's command-line tools share.

``python -m paddle_llrd lr-table`` and ``python -m paddle_llrd schedules``
refuse a bad number the same way: argparse prints ``argument --decay:
expected a finite number > 0, got '0'`` and exits 2, with no traceback. The
rules are :mod:`paddle_llrd.checks`'; only the words are argparse's.
"""
from __future__ import annotations

import argparse
import math
from typing import Any, Callable

from paddle_llrd.checks import checked_count, checked_in_range


def _argparse_type(read: Callable[[str], Any], kind: str, check: Callable[[Any], Any],
                   expected: str) -> Callable[[str], Any]:
    """An argparse type: ``read`` the text (else "expected ``kind``"), then ``check`` the value
    (else "expected ``expected``"); argparse prints either after the flag and exits 2."""

    def parse(text: str) -> Any:
        try:
            value = read(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}") from None
        try:
            return check(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None

    return parse


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
    return _argparse_type(
        float, "a number",
        lambda value: checked_in_range(value, "value", low=minimum, high=math.inf, low_open=not inclusive,
                                       high_open=True),
        f"a finite number {bound}",
    )


def integer_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an int ``>= minimum``.

    Examples:
        >>> integer_at_least(1)("12")
        12
        >>> integer_at_least(1)("1.5")
        Traceback (most recent call last):
        argparse.ArgumentTypeError: expected an integer, got '1.5'
    """
    return _argparse_type(int, "an integer", lambda value: checked_count(value, "value", minimum=minimum),
                          f"an integer >= {minimum}")
