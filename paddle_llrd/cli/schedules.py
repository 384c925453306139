"""``python -m paddle_llrd schedules``: every schedule's lr at characteristic steps, and plots.

The table lists each registered schedule (and with ``--classes`` the
scheduler classes) at the steps of
:func:`paddle_llrd.cli.schedule_table.characteristic_steps`; the curves are drawn
with matplotlib when it is installed (``pip install paddle_llrd[plot]``).
Options left unset keep each schedule's own defaults; an option goes only to
the schedules that take it.
"""
from __future__ import annotations

import argparse
import math
import os
import warnings
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

from paddle_llrd.cli.argparse_types import finite_number, integer_at_least
from paddle_llrd.cli.schedule_table import (
    DEFAULT_LEARNING_RATE,
    DEFAULT_MIN_LR_RATE,
    DEFAULT_TOTAL_STEPS,
    DEFAULT_WARMUP_STEPS,
    Curve,
    characteristic_steps,
    class_schedules,
    format_table,
    registry_schedules,
    schedule_curves,
)
from paddle_llrd.warning_classes import LongWarmupWarning

__all__ = ["COLOURS", "LINE_STYLES", "CurveStyle", "curve_styles", "draw_curves", "legend_below", "main",
           "matplotlib_figure", "plot_schedules", "save_figure", "schedule_table_text", "schedules_figure"]

#: Where the plot goes: a folder of its own, not the demo's demo_output.
DEFAULT_OUTPUT = os.path.join("schedules_output", "schedules.png")
PLOT_HINT = "pip install paddle_llrd[plot]"


def schedule_table_text(
    learning_rate: float = DEFAULT_LEARNING_RATE,
    warmup_steps: int = DEFAULT_WARMUP_STEPS,
    total_steps: int = DEFAULT_TOTAL_STEPS,
    *,
    include_classes: bool = False,
    **options: Any,
) -> str:
    """The table ``python -m paddle_llrd schedules`` prints, ``options`` those of :func:`registry_schedules`."""
    points = characteristic_steps(warmup_steps, total_steps)
    last_step = max(step for _, step in points)  # the end of a warmup longer than training included
    schedules = registry_schedules(learning_rate, warmup_steps, total_steps, **options)
    if include_classes:
        schedules += class_schedules(learning_rate, warmup_steps, total_steps)
    return format_table(schedule_curves(schedules, last_step, total_steps), points)


def matplotlib_figure() -> type:
    """matplotlib's ``Figure`` class (Agg canvas, no global backend switched); ``ImportError`` naming the extra."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(f"Plotting the schedules needs matplotlib: {PLOT_HINT} (or pip install matplotlib).") from exc
    return Figure


#: Line colours: matplotlib's ten (tab10), then six darker or stronger tones unlike any of them, so
#: that every built-in schedule (and a few of your own) has a colour of its own in one panel.
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf", "#000000", "#393b79", "#637939", "#843c39", "#7b4173", "#bd9e39")
LINE_STYLES = ("solid", "dashed", "dashdot", "dotted")
#: Two curves within this share of the panel's largest lr of each other are the same line to the eye.
COINCIDENT_DISTANCE = 0.01
#: Curves that are the same line over this share of their steps get different line styles (every
#: warmup schedule shares the warmup and 0 after the end: that alone is less); over the
#: second share the later one hides the earlier, which is drawn wider for it.
DIFFERENT_STYLE_SHARE, HIDDEN_SHARE = 0.4, 0.75
#: A curve's line width, and how much wider it is than the widest later curve that hides it.
LINE_WIDTH, WIDTH_PER_CURVE_ON_TOP = 1.5, 1.5


class CurveStyle(NamedTuple):
    """How :func:`draw_curves` draws one curve: a matplotlib colour, line style and width (in points)."""

    colour: str
    line_style: str
    width: float


def _coincident_share(curve: Sequence[float], other: Sequence[float], scale: float) -> float:
    """The share of the steps over which the two curves are the same line to the eye."""
    close = sum(abs(a - b) <= COINCIDENT_DISTANCE * scale for a, b in zip(curve, other))
    return close / max(len(curve), len(other), 1)


def curve_styles(curves: Dict[str, Curve]) -> Dict[str, CurveStyle]:
    """A :class:`CurveStyle` for each curve drawn (not a failed schedule's), in order.

    Every curve gets a colour of its own while :data:`COLOURS` lasts, then a
    colour again with a line style its first owner does not have. Several
    schedules are the same line over long stretches (``linear``,
    ``polynomial`` and ``linear_annealing_with_warmup``; ``constant`` and
    ``constant_with_warmup``): a curve takes a line style that no earlier
    curve it coincides with has, and is drawn wider than every later curve
    that hides it (by :data:`WIDTH_PER_CURVE_ON_TOP`), so that the curves on
    top leave it visible along their edges.

    Examples:
        >>> styles = curve_styles({"linear": [0.0, 1.0, 0.5, 0.0], "linear_annealing": [0.0, 1.0, 0.5, 0.0],
        ...                        "failed": ValueError("no"), "constant": [1.0, 1.0, 1.0, 1.0]})
        >>> for label, style in styles.items():
        ...     print(label, style.colour, style.line_style, style.width)
        linear #1f77b4 solid 3.0
        linear_annealing #ff7f0e dashed 1.5
        constant #2ca02c dashdot 1.5
    """
    drawn = [(label, curve) for label, curve in curves.items() if not isinstance(curve, Exception)]
    scale = max((abs(value) for _, curve in drawn for value in curve), default=0.0)
    share = {(i, j): _coincident_share(drawn[i][1], drawn[j][1], scale)
             for i in range(len(drawn)) for j in range(i + 1, len(drawn))}
    line_styles: List[str] = []
    for index in range(len(drawn)):
        colour = COLOURS[index % len(COLOURS)]
        taken = {line_styles[other] for other in range(index)
                 if COLOURS[other % len(COLOURS)] == colour or share[other, index] >= DIFFERENT_STYLE_SHARE}
        preferred = [LINE_STYLES[(index + shift) % len(LINE_STYLES)] for shift in range(len(LINE_STYLES))]
        line_styles.append(next((style for style in preferred if style not in taken), preferred[0]))
    # From the last curve back: each wider than every later curve that hides it, so nested lines show.
    widths = [LINE_WIDTH] * len(drawn)
    for index in reversed(range(len(drawn))):
        hiding = [widths[later] for later in range(index + 1, len(drawn)) if share[index, later] >= HIDDEN_SHARE]
        widths[index] = max(hiding) + WIDTH_PER_CURVE_ON_TOP if hiding else LINE_WIDTH
    return {label: CurveStyle(COLOURS[index % len(COLOURS)], line_styles[index], widths[index])
            for index, (label, _) in enumerate(drawn)}


def draw_curves(axes, curves: Dict[str, Curve], title: str, warmup_steps: int, total_steps: int) -> None:
    """One line per curve in the style of :func:`curve_styles` (a failed schedule is left out), dotted
    grey lines at the end of warmup and of training."""
    for label, style in curve_styles(curves).items():
        curve = curves[label]
        axes.plot(range(len(curve)), curve, color=style.colour, linestyle=style.line_style, linewidth=style.width,
                  label=label)
    for step in (warmup_steps, total_steps):
        axes.axvline(step, color="0.6", linestyle=":", linewidth=0.8)
    axes.set_title(title)
    axes.set_xlabel("step")
    axes.set_ylabel("learning rate")
    axes.grid(True, alpha=0.3)


def legend_below(axes) -> None:
    """The legend in two columns under the axes."""
    axes.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, frameon=False)


def save_figure(figure, path: str) -> str:
    """Write ``figure`` to ``path`` (its directory made), returning ``path``."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    figure.savefig(path, dpi=100)
    return path


def schedules_figure(
    learning_rate: float = DEFAULT_LEARNING_RATE,
    warmup_steps: int = DEFAULT_WARMUP_STEPS,
    total_steps: int = DEFAULT_TOTAL_STEPS,
    *,
    include_classes: bool = True,
    **options: Any,
):
    """The matplotlib ``Figure`` :func:`plot_schedules` writes: every registered schedule's curve (and the
    scheduler classes' in a second panel), each in a style of its own (:func:`curve_styles`).

    The options are those of :func:`registry_schedules` (``None``: the
    schedule's own default). matplotlib is imported here, and only its
    object-oriented ``Figure`` (Agg canvas) is used, so no global backend is
    switched. Without matplotlib this raises ``ImportError`` saying
    ``pip install paddle_llrd[plot]``.

    Examples:
        >>> figure = schedules_figure(1e-3, 10, 100, include_classes=False)
        >>> [axes.get_title() for axes in figure.axes]
        ['get_scheduler(name, ...)', '']
    """
    Figure = matplotlib_figure()
    last_step = total_steps + max(1, total_steps // 10)
    panels = [
        (
            "get_scheduler(name, ...)",
            schedule_curves(
                registry_schedules(learning_rate, warmup_steps, total_steps, **options),
                last_step,
                total_steps,
            ),
        )
    ]
    if include_classes:
        classes = class_schedules(learning_rate, warmup_steps, total_steps)
        panels.append(("scheduler classes", schedule_curves(classes, last_step, total_steps)))
    # One panel above the other, each with its legend in a row of its own below it, at about
    # the width a docs page shows it: side by side, the 14-inch figure was scaled to half
    # and its legends read about 5 px tall.
    columns = [2 if max(len(label) for label in curves) <= 32 else 1 for _, curves in panels]
    legend_heights = [0.3 * math.ceil(len(curves) / ncol) + 0.2 for (_, curves), ncol in zip(panels, columns)]
    heights = [size for legend_height in legend_heights for size in (4.5, legend_height)]
    figure = Figure(figsize=(8, sum(heights) + 0.5), layout="constrained")
    rows = figure.subplots(2 * len(panels), 1, squeeze=False, gridspec_kw={"height_ratios": heights})
    for index, ((title, curves), ncol) in enumerate(zip(panels, columns)):
        axes, legend_axes = rows[2 * index, 0], rows[2 * index + 1, 0]
        draw_curves(axes, curves, title, warmup_steps, total_steps)
        legend_axes.axis("off")
        legend_axes.legend(*axes.get_legend_handles_labels(), loc="upper center", ncol=ncol, frameon=False,
                           fontsize="medium")
    figure.suptitle(f"peak lr {learning_rate:g}, {warmup_steps} warmup steps, {total_steps} training steps")
    return figure


def plot_schedules(
    path: str,
    learning_rate: float = DEFAULT_LEARNING_RATE,
    warmup_steps: int = DEFAULT_WARMUP_STEPS,
    total_steps: int = DEFAULT_TOTAL_STEPS,
    *,
    include_classes: bool = True,
    **options: Any,
) -> str:
    """Write :func:`schedules_figure` as a PNG to ``path`` (its folder made); returns ``path``."""
    figure = schedules_figure(learning_rate, warmup_steps, total_steps, include_classes=include_classes, **options)
    return save_figure(figure, path)


_non_negative_float = finite_number(0.0, inclusive=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m paddle_llrd schedules",
        description="Print every registered learning-rate schedule at characteristic steps and plot the curves.",
    )
    parser.add_argument("--learning-rate", type=_non_negative_float, default=DEFAULT_LEARNING_RATE,
                        help="peak learning rate (default: %(default)g)")
    parser.add_argument("--warmup-steps", type=integer_at_least(0), default=DEFAULT_WARMUP_STEPS,
                        help="warmup steps (default: %(default)d)")
    parser.add_argument("--total-steps", type=integer_at_least(1), default=DEFAULT_TOTAL_STEPS,
                        help="training steps (default: %(default)d)")
    parser.add_argument("--num-cycles", type=_non_negative_float, default=None,
                        help="cosine waves for 'cosine' and 'cosine_with_min_lr' (default 0.5), "
                             "cycles for 'cosine_with_restarts' (default 1)")
    parser.add_argument("--lr-end", type=_non_negative_float, default=None,
                        help="final lr for 'polynomial' (default: 1e-07)")
    parser.add_argument("--power", type=_non_negative_float, default=None,
                        help="power for 'polynomial' (default: 1)")
    parser.add_argument("--min-lr", type=_non_negative_float, default=None,
                        help="floor (an lr) for 'cosine', 'cosine_with_min_lr', 'warmup_stable_decay' and "
                             "the annealing schedules (default: 0)")
    parser.add_argument("--min-lr-rate", type=_non_negative_float, default=None,
                        help=f"floor as a fraction of the peak for 'cosine_with_min_lr' "
                             f"(default: {DEFAULT_MIN_LR_RATE:g} when --min-lr is not given)")
    parser.add_argument("--decay-style", choices=["linear", "cosine", "exponential", "1-sqrt"], default=None,
                        help="decay stage of 'warmup_stable_decay' (default: cosine)")
    parser.add_argument("--lr-warmup-init", type=_non_negative_float, default=None,
                        help="lr the warmup starts from (Megatron-LM's --lr-warmup-init), for every schedule "
                             "with a warmup (default: 0)")
    parser.add_argument("--classes", action="store_true",
                        help="also list the scheduler classes (LinearDecayWithWarmup, ...)")
    parser.add_argument("--output", default=DEFAULT_OUTPUT,
                        help="PNG file for the plot (default: %(default)s)")
    parser.add_argument("--no-plot", action="store_true", help="print the table only")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run ``python -m paddle_llrd schedules [flags]``; returns the exit status."""
    args = _parser().parse_args(argv)
    options = dict(num_cycles=args.num_cycles, lr_end=args.lr_end, power=args.power, min_lr=args.min_lr,
                   min_lr_rate=args.min_lr_rate, decay_style=args.decay_style, lr_warmup_init=args.lr_warmup_init)
    print(
        f"Learning rate at characteristic steps: peak lr {args.learning_rate:g}, "
        f"{args.warmup_steps} warmup steps, {args.total_steps} training steps"
    )
    if args.warmup_steps > args.total_steps:
        print(
            f"Note: --warmup-steps {args.warmup_steps} is longer than --total-steps {args.total_steps}: the "
            "schedules that accept it (as PaddleNLP does) are still climbing when training ends; those "
            "whose decay stage cannot fit show the error."
        )
    with warnings.catch_warnings():
        # The note above says it once, for every schedule.
        warnings.simplefilter("ignore", LongWarmupWarning)
        return _table_and_plot(args, options)


def _table_and_plot(args: argparse.Namespace, options: Dict[str, Any]) -> int:
    print(schedule_table_text(args.learning_rate, args.warmup_steps, args.total_steps,
                              include_classes=args.classes, **options))
    if args.no_plot:
        return 0
    try:
        path = plot_schedules(
            args.output,
            args.learning_rate,
            args.warmup_steps,
            args.total_steps,
            include_classes=args.classes,
            **options,
        )
    except ImportError:
        print(f"\nNo plot: matplotlib is not installed. Get it with `{PLOT_HINT}`.")
        return 0
    print(f"\nPlot written to {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
