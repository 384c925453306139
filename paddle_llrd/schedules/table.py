"""``python -m paddle_llrd schedules``: every schedule's lr at characteristic steps, and plots.

The table lists each schedule registered in
:data:`paddle_llrd.TYPE_TO_SCHEDULER_FUNCTION` (built with
:func:`paddle_llrd.get_scheduler`, as PaddleNLP's Trainer builds it) at step 0,
half way through warmup, the end of warmup, 25/50/75/100 % of training and
past the end; ``--classes`` adds the scheduler classes. The curves are drawn
with matplotlib when it is installed (``pip install paddle_llrd[plot]``).

Options left unset keep each schedule's own defaults; an option goes only to
the schedules that take it. ``"cosine_with_min_lr"``, which needs a floor, is
shown with ``min_lr_rate=0.1`` unless ``--min-lr`` or ``--min-lr-rate`` is given.
Two schedules need more than a peak, a warmup and a length, and are shown
with illustrative settings (:func:`showcase_options`): ``"sequential"`` as
``inverse_sqrt`` (with the run's warmup) for the first half, then a cosine
from half the peak; ``"reduce_lr_on_plateau"`` (no warmup, ``factor=0.5``,
``patience`` a tenth of the run) stepped on :func:`plateau_metric`, a loss
that falls until 40 % of training and is flat afterwards.

Every lr is read from a real scheduler stepped from step 0, as an optimizer
would see it, never from a formula.
"""
from __future__ import annotations

import argparse
import functools
import inspect
import math
import os
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from paddle.optimizer.lr import LRScheduler, ReduceOnPlateau

from ..command_line import finite_number, integer_at_least
from . import registry
from .warmup import (
    LONG_WARMUP_TEXT,
    ConstScheduleWithWarmup,
    CosineAnnealingWithWarmupDecay,
    CosineDecayWithWarmup,
    InverseSquareRootSchedule,
    LinearAnnealingWithWarmupDecay,
    LinearDecayWithWarmup,
    PolyDecayWithWarmup,
)

__all__ = [
    "characteristic_steps",
    "plateau_metric",
    "showcase_options",
    "registry_schedules",
    "class_schedules",
    "wsd_style_schedules",
    "warmup_init_schedules",
    "schedule_table_text",
    "format_rst_table",
    "write_doc_tables",
    "lr_curve",
    "format_table",
    "plot_schedules",
    "write_doc_figures",
    "main",
]

DEFAULT_LEARNING_RATE = 5e-5
DEFAULT_WARMUP_STEPS = 100
DEFAULT_TOTAL_STEPS = 1000
DEFAULT_OUTPUT = os.path.join("demo_output", "schedules.png")
#: The floor ``"cosine_with_min_lr"`` is shown with when no other is given (it has no default).
DEFAULT_MIN_LR_RATE = 0.1
PLOT_HINT = "pip install paddle_llrd[plot]"

#: A schedule to show: (label, file-name stem, factory building a fresh scheduler).
Schedule = Tuple[str, str, Callable[[], LRScheduler]]
Curve = Union[List[float], Exception]


def characteristic_steps(warmup_steps: int, total_steps: int) -> List[Tuple[str, int]]:
    """``(label, step)`` pairs: 0, mid-warmup, end of warmup, 25/50/75/100 % of training, past the end.

    Sorted by step; a step already listed under an earlier label is left out
    (with no warmup, the first three are all step 0).

    Examples:
        >>> characteristic_steps(100, 1000)  # doctest: +NORMALIZE_WHITESPACE
        [('start', 0), ('warmup/2', 50), ('warmup end', 100), ('25%', 250), ('50%', 500),
         ('75%', 750), ('100%', 1000), ('past end', 1100)]
    """
    candidates = [
        ("start", 0),
        ("warmup/2", warmup_steps // 2),
        ("warmup end", warmup_steps),
        ("25%", round(0.25 * total_steps)),
        ("50%", round(0.50 * total_steps)),
        ("75%", round(0.75 * total_steps)),
        ("100%", total_steps),
        ("past end", total_steps + max(1, total_steps // 10)),
    ]
    seen = set()
    points = []
    for label, step in sorted(candidates, key=lambda point: point[1]):
        if step not in seen:
            seen.add(step)
            points.append((label, step))
    return points


def _options_taken_by(fn: Callable[..., Any], options: Dict[str, Any]) -> Dict[str, Any]:
    """Those of ``options`` that ``fn``'s signature names (all of them if it takes ``**kwargs``).

    ``lr_warmup_init`` also reaches the built-in warmup schedules, which take it through ``get_scheduler``.
    """
    parameters = inspect.signature(fn).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return dict(options)
    names = {p.name for p in parameters}
    if fn in registry._WARMUP_SCHEDULE_FUNCTIONS:
        names.add("lr_warmup_init")
    return {key: value for key, value in options.items() if key in names}


#: The share of training over which :func:`plateau_metric` falls.
PLATEAU_FALL_SHARE = 0.4


def plateau_metric(step: int, total_steps: int) -> float:
    """The loss the table steps ``"reduce_lr_on_plateau"`` on: from 2 down to 1 at 40 % of training, then flat.

    Examples:
        >>> [plateau_metric(step, 10) for step in (0, 2, 4, 8)]
        [2.0, 1.5, 1.0, 1.0]
    """
    fall = max(1, round(PLATEAU_FALL_SHARE * total_steps))
    return 1.0 + max(0, fall - step) / fall


def showcase_options(name: str, learning_rate: float, warmup_steps: int, total_steps: int) -> Dict[str, Any]:
    """The settings the table and the docs show ``"sequential"`` and ``"reduce_lr_on_plateau"`` with.

    ``"sequential"``: ``inverse_sqrt`` (with the run's warmup) for the first
    half of training, then ``cosine`` from half the peak to 0 over the rest.
    ``"reduce_lr_on_plateau"``: no warmup, ``factor=0.5`` and ``patience`` a
    tenth of the run, stepped on :func:`plateau_metric`. Other names: ``{}``.

    Examples:
        >>> showcase_options("reduce_lr_on_plateau", 1e-3, 100, 1000)
        {'num_warmup_steps': 0, 'factor': 0.5, 'patience': 100}
    """
    if name == "sequential":
        return {"stages": [{"name": "inverse_sqrt", "num_steps": total_steps // 2},
                           {"name": "cosine", "learning_rate": learning_rate / 2}]}
    if name == "reduce_lr_on_plateau":
        return {"num_warmup_steps": 0, "factor": 0.5, "patience": total_steps // 10}
    return {}


def registry_schedules(
    learning_rate: float = DEFAULT_LEARNING_RATE,
    warmup_steps: int = DEFAULT_WARMUP_STEPS,
    total_steps: int = DEFAULT_TOTAL_STEPS,
    num_cycles: Optional[float] = None,
    lr_end: Optional[float] = None,
    power: Optional[float] = None,
    min_lr: Optional[float] = None,
    *,
    min_lr_rate: Optional[float] = None,
    decay_style: Optional[str] = None,
    lr_warmup_init: Optional[float] = None,
) -> List[Schedule]:
    """One entry per registered name, built by :func:`paddle_llrd.get_scheduler` with these arguments.

    An option left ``None`` is not passed (the schedule's default applies);
    ``min_lr_rate``, ``decay_style`` and ``lr_warmup_init`` go only to the
    schedules that take them. Without ``min_lr`` and ``min_lr_rate``,
    ``"cosine_with_min_lr"`` gets ``min_lr_rate=DEFAULT_MIN_LR_RATE``.
    ``"sequential"`` and ``"reduce_lr_on_plateau"`` also get
    :func:`showcase_options`.
    """
    common = {
        key: value
        for key, value in (("num_cycles", num_cycles), ("lr_end", lr_end), ("power", power), ("min_lr", min_lr))
        if value is not None
    }
    if min_lr is None and min_lr_rate is None:
        min_lr_rate = DEFAULT_MIN_LR_RATE
    extras = {key: value for key, value in (("min_lr_rate", min_lr_rate), ("decay_style", decay_style),
                                            ("lr_warmup_init", lr_warmup_init))
              if value is not None}

    def factory(name: str, fn: Callable[..., Any]) -> Callable[[], LRScheduler]:
        options = {"num_warmup_steps": warmup_steps, **common, **_options_taken_by(fn, extras),
                   **showcase_options(name, learning_rate, warmup_steps, total_steps)}
        return lambda: registry.get_scheduler(name, learning_rate, num_training_steps=total_steps, **options)

    return [
        (str(key), f"registry_{key}", factory(str(key), fn))
        for key, fn in list(registry.TYPE_TO_SCHEDULER_FUNCTION.items())
    ]


def wsd_style_schedules(
    learning_rate: float = DEFAULT_LEARNING_RATE,
    warmup_steps: int = DEFAULT_WARMUP_STEPS,
    total_steps: int = DEFAULT_TOTAL_STEPS,
    decay_ratio: float = 0.3,
    min_lr_ratio: float = 0.1,
) -> List[Schedule]:
    """``"warmup_stable_decay"`` in each decay style (by default over the last 30 %, down to a tenth of the peak)."""

    def factory(style: str) -> Callable[[], LRScheduler]:
        return lambda: registry.get_scheduler(
            "warmup_stable_decay",
            learning_rate,
            num_warmup_steps=warmup_steps,
            num_training_steps=total_steps,
            decay_ratio=decay_ratio,
            decay_style=style,
            min_lr_ratio=min_lr_ratio,
        )

    return [
        (f"decay_style={style!r}", f"registry_warmup_stable_decay_{style}", factory(style))
        for style in ("linear", "cosine", "exponential", "1-sqrt")
    ]


def _restart_cycle_schedules(learning_rate: float, warmup_steps: int, total_steps: int) -> List[Schedule]:
    """``"cosine_with_restarts"`` with 0.5, 1 and 3 cycles."""

    def factory(cycles: float) -> Callable[[], LRScheduler]:
        return lambda: registry.get_scheduler(
            "cosine_with_restarts", learning_rate, num_warmup_steps=warmup_steps,
            num_training_steps=total_steps, num_cycles=cycles,
        )

    return [(f"num_cycles={cycles:g}", f"restarts_{cycles:g}", factory(cycles)) for cycles in (0.5, 1.0, 3.0)]


def _inverse_sqrt_timescale_schedules(learning_rate: float, warmup_steps: int, total_steps: int) -> List[Schedule]:
    """``"inverse_sqrt"`` with warmup, and without it at the default and at a short timescale."""
    short = max(1, total_steps // 10)

    def factory(warmup: int, timescale: Optional[int]) -> Callable[[], LRScheduler]:
        return lambda: registry.get_scheduler(
            "inverse_sqrt", learning_rate, num_warmup_steps=warmup, timescale=timescale
        )

    return [
        (f"warmup {warmup_steps} (timescale {warmup_steps or registry.DEFAULT_INVERSE_SQRT_TIMESCALE})",
         "isr_warmup", factory(warmup_steps, None)),
        (f"no warmup (timescale {registry.DEFAULT_INVERSE_SQRT_TIMESCALE})", "isr_default", factory(0, None)),
        (f"no warmup, timescale={short}", "isr_short", factory(0, short)),
    ]


#: The warmup start the docs show ``lr_warmup_init`` with, as a fraction of the peak.
DOC_WARMUP_INIT_SHARE = 0.1


def warmup_init_schedules(
    learning_rate: float = DEFAULT_LEARNING_RATE,
    warmup_steps: int = DEFAULT_WARMUP_STEPS,
    total_steps: int = DEFAULT_TOTAL_STEPS,
    share: float = DOC_WARMUP_INIT_SHARE,
) -> List[Schedule]:
    """``"cosine"`` from 0 and ``"linear"``, ``"cosine"``, ``"warmup_stable_decay"`` with ``lr_warmup_init = share * peak``."""
    init = share * learning_rate

    def factory(name: str, lr_warmup_init: Optional[float]) -> Callable[[], LRScheduler]:
        options = {} if lr_warmup_init is None else {"lr_warmup_init": lr_warmup_init}
        return lambda: registry.get_scheduler(
            name, learning_rate, num_warmup_steps=warmup_steps, num_training_steps=total_steps, **options
        )

    return [
        ("cosine (warmup from 0)", "warmup_init_none", factory("cosine", None)),
        (f"cosine, lr_warmup_init={init:g}", "warmup_init_cosine", factory("cosine", init)),
        (f"linear, lr_warmup_init={init:g}", "warmup_init_linear", factory("linear", init)),
        (f"warmup_stable_decay, lr_warmup_init={init:g}", "warmup_init_wsd", factory("warmup_stable_decay", init)),
    ]


def class_schedules(
    learning_rate: float = DEFAULT_LEARNING_RATE,
    warmup_steps: int = DEFAULT_WARMUP_STEPS,
    total_steps: int = DEFAULT_TOTAL_STEPS,
) -> List[Schedule]:
    """The scheduler classes with illustrative options (floors at a tenth of the peak)."""
    lr, warmup, total = learning_rate, warmup_steps, total_steps
    floor = lr / 10
    return [
        ("LinearDecayWithWarmup", "LinearDecayWithWarmup", lambda: LinearDecayWithWarmup(lr, total, warmup)),
        ("ConstScheduleWithWarmup", "ConstScheduleWithWarmup", lambda: ConstScheduleWithWarmup(lr, warmup)),
        ("CosineDecayWithWarmup", "CosineDecayWithWarmup", lambda: CosineDecayWithWarmup(lr, total, warmup)),
        (
            "CosineDecayWithWarmup, num_cycles=2",
            "CosineDecayWithWarmup_num_cycles",
            lambda: CosineDecayWithWarmup(lr, total, warmup, num_cycles=2),
        ),
        (
            "CosineDecayWithWarmup, hard restarts, num_cycles=2.0",
            "CosineDecayWithWarmup_hard_restarts",
            lambda: CosineDecayWithWarmup(lr, total, warmup, with_hard_restarts=True, num_cycles=2.0),
        ),
        (
            "PolyDecayWithWarmup, lr_end=lr/10, power=2",
            "PolyDecayWithWarmup",
            lambda: PolyDecayWithWarmup(lr, total, warmup, lr_end=floor, power=2.0),
        ),
        (
            "CosineAnnealingWithWarmupDecay, min_lr=lr/10",
            "CosineAnnealingWithWarmupDecay",
            lambda: CosineAnnealingWithWarmupDecay(lr, floor, warmup, total),
        ),
        (
            "LinearAnnealingWithWarmupDecay, min_lr=lr/10",
            "LinearAnnealingWithWarmupDecay",
            lambda: LinearAnnealingWithWarmupDecay(lr, floor, warmup, total),
        ),
        (
            "InverseSquareRootSchedule",
            "InverseSquareRootSchedule",
            lambda: InverseSquareRootSchedule(max(1, warmup), lr),
        ),
    ]


def lr_curve(
    factory: Callable[[], LRScheduler], last_step: int, metric: Optional[Callable[[int], float]] = None
) -> List[float]:
    """The lr at steps ``0..last_step`` of a fresh scheduler, advanced with ``step()`` as in training.

    A :class:`~paddle.optimizer.lr.ReduceOnPlateau` is stepped with
    ``metric(step)`` after each step instead, which it then needs.
    """
    scheduler = factory()
    if isinstance(scheduler, ReduceOnPlateau) and metric is None:
        raise TypeError("A ReduceOnPlateau is stepped with a metric: pass `metric`, a function of the step.")
    values = [scheduler()]
    for step in range(last_step):
        if isinstance(scheduler, ReduceOnPlateau):
            scheduler.step(metric(step))
        else:
            scheduler.step()
        values.append(scheduler())
    return values


def _curves(schedules: Sequence[Schedule], last_step: int, total_steps: int) -> Dict[str, Curve]:
    """Each schedule's :func:`lr_curve`; a ``ReduceOnPlateau`` is stepped on :func:`plateau_metric`."""
    metric = functools.partial(plateau_metric, total_steps=total_steps)
    curves: Dict[str, Curve] = {}
    for label, _, factory in schedules:
        try:
            curves[label] = lr_curve(factory, last_step, metric)
        except (TypeError, ValueError) as exc:  # a schedule these settings do not fit: report, go on
            curves[label] = exc
    return curves


def format_table(curves: Dict[str, Curve], points: Sequence[Tuple[str, int]]) -> str:
    """Rows of ``label  lr(step) ...`` for each curve; a failed schedule shows its error."""
    name_width = max([len("schedule")] + [len(label) for label in curves])
    step_cells = [f"step {step}" for _, step in points]
    width = max([len("0.000e+00")] + [len(label) for label, _ in points] + [len(cell) for cell in step_cells]) + 2
    lines = [
        "".ljust(name_width) + "".join(label.rjust(width) for label, _ in points),
        "schedule".ljust(name_width) + "".join(cell.rjust(width) for cell in step_cells),
    ]
    lines.append("-" * len(lines[1]))
    for label, curve in curves.items():
        if isinstance(curve, Exception):
            lines.append(f"{label.ljust(name_width)}  error: {curve}")
        else:
            lines.append(label.ljust(name_width) + "".join(f"{curve[step]:.3e}".rjust(width) for _, step in points))
    return "\n".join(lines)


def _import_matplotlib_figure():
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(f"Plotting the schedules needs matplotlib: {PLOT_HINT} (or pip install matplotlib).") from exc
    return Figure


def _draw(axes, curves: Dict[str, Curve], title: str, warmup_steps: int, total_steps: int) -> None:
    # Several schedules coincide over long stretches (linear/polynomial,
    # constant/constant_with_warmup); varied dash patterns keep both visible.
    # matplotlib cycles 10 colours: shift the dashes once per colour cycle so
    # that no two curves share both.
    dashes = ["solid", "dashed", "dashdot", "dotted", (0, (8, 2, 1, 2, 1, 2))]
    for index, (label, curve) in enumerate(curves.items()):
        if not isinstance(curve, Exception):
            linestyle = dashes[(index + index // 10) % len(dashes)]
            axes.plot(range(len(curve)), curve, color=f"C{index % 10}", linestyle=linestyle, label=label,
                      linewidth=1.6)
    for step in (warmup_steps, total_steps):
        axes.axvline(step, color="0.6", linestyle=":", linewidth=0.8)
    axes.set_title(title)
    axes.set_xlabel("step")
    axes.set_ylabel("learning rate")
    axes.grid(True, alpha=0.3)


def _legend_below(axes) -> None:
    axes.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, frameon=False)


def _save(figure, path: str) -> str:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    figure.savefig(path, dpi=100)
    return path


def plot_schedules(
    path: str,
    learning_rate: float = DEFAULT_LEARNING_RATE,
    warmup_steps: int = DEFAULT_WARMUP_STEPS,
    total_steps: int = DEFAULT_TOTAL_STEPS,
    *,
    include_classes: bool = True,
    num_cycles: Optional[float] = None,
    lr_end: Optional[float] = None,
    power: Optional[float] = None,
    min_lr: Optional[float] = None,
    min_lr_rate: Optional[float] = None,
    decay_style: Optional[str] = None,
    lr_warmup_init: Optional[float] = None,
) -> str:
    """Write a PNG of every registered schedule's curve (and the scheduler classes') to ``path``.

    The options are those of :func:`registry_schedules` (``None``: the
    schedule's own default). matplotlib is imported here, and only its
    object-oriented ``Figure`` (Agg canvas) is used, so no global backend is
    switched. Without matplotlib this raises ``ImportError`` saying
    ``pip install paddle_llrd[plot]``.

    Returns:
        ``path``.
    """
    Figure = _import_matplotlib_figure()
    last_step = total_steps + max(1, total_steps // 10)
    panels = [
        (
            "get_scheduler(name, ...)",
            _curves(
                registry_schedules(
                    learning_rate, warmup_steps, total_steps, num_cycles, lr_end, power, min_lr,
                    min_lr_rate=min_lr_rate, decay_style=decay_style, lr_warmup_init=lr_warmup_init,
                ),
                last_step,
                total_steps,
            ),
        )
    ]
    if include_classes:
        panels.append(("scheduler classes", _curves(class_schedules(learning_rate, warmup_steps, total_steps), last_step,
                                                      total_steps)))
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
        _draw(axes, curves, title, warmup_steps, total_steps)
        legend_axes.axis("off")
        legend_axes.legend(*axes.get_legend_handles_labels(), loc="upper center", ncol=ncol, frameon=False,
                           fontsize="medium")
    figure.suptitle(f"peak lr {learning_rate:g}, {warmup_steps} warmup steps, {total_steps} training steps")
    return _save(figure, path)


def write_doc_figures(
    directory: str,
    learning_rate: float = DEFAULT_LEARNING_RATE,
    warmup_steps: int = DEFAULT_WARMUP_STEPS,
    total_steps: int = DEFAULT_TOTAL_STEPS,
) -> List[str]:
    """Write ``schedules.png`` and one ``<stem>.png`` per schedule into ``directory`` (for the docs).

    The stems are ``registry_<name>`` for registered schedules and the class
    name (plus ``_num_cycles`` / ``_hard_restarts`` for the cosine variants)
    for the scheduler classes. ``registry_warmup_stable_decay_styles.png``
    shows :func:`wsd_style_schedules` together,
    ``registry_cosine_with_restarts_cycles.png`` three ``num_cycles`` and
    ``registry_inverse_sqrt_timescales.png`` the ``timescale`` with and
    without warmup, ``registry_lr_warmup_init.png``
    :func:`warmup_init_schedules`.

    Returns:
        The paths written, ``schedules.png`` first.
    """
    Figure = _import_matplotlib_figure()
    written = [plot_schedules(os.path.join(directory, "schedules.png"), learning_rate, warmup_steps, total_steps)]
    last_step = total_steps + max(1, total_steps // 10)
    groups = [
        ("warmup_stable_decay: the decay styles", "registry_warmup_stable_decay_styles", wsd_style_schedules),
        ("cosine_with_restarts: num_cycles", "registry_cosine_with_restarts_cycles", _restart_cycle_schedules),
        ("inverse_sqrt: warmup and timescale", "registry_inverse_sqrt_timescales", _inverse_sqrt_timescale_schedules),
        ("lr_warmup_init: the warmup starts above 0", "registry_lr_warmup_init", warmup_init_schedules),
    ]
    for title, stem, make_schedules in groups:
        curves = _curves(make_schedules(learning_rate, warmup_steps, total_steps), last_step, total_steps)
        figure = Figure(figsize=(5.5, 4.2), layout="constrained")
        axes = figure.subplots()
        _draw(axes, curves, title, warmup_steps, total_steps)
        _legend_below(axes)
        written.append(_save(figure, os.path.join(directory, f"{stem}.png")))
    schedules = registry_schedules(learning_rate, warmup_steps, total_steps) + class_schedules(
        learning_rate, warmup_steps, total_steps
    )
    for label, stem, factory in schedules:
        curves = _curves([(label, stem, factory)], last_step, total_steps)
        if isinstance(curves[label], Exception):
            continue
        figure = Figure(figsize=(5.5, 3.2), layout="constrained")
        axes = figure.subplots()
        _draw(axes, curves, label, warmup_steps, total_steps)
        written.append(_save(figure, os.path.join(directory, f"{stem}.png")))
    return written


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
    return format_table(_curves(schedules, last_step, total_steps), points)


def format_rst_table(curves: Dict[str, Curve], points: Sequence[Tuple[str, int]]) -> str:
    """An RST ``list-table``: one row per characteristic step, one column per curve (narrow enough for a page).

    A failed schedule shows its error in each of its cells.
    """
    lines = [".. list-table::", "   :header-rows: 1", "", "   * - step"]
    lines += [f"     - ``{label}``" if label.isidentifier() else f"     - {label}" for label in curves]
    for label, step in points:
        lines.append(f"   * - {step} ({label})")
        for curve in curves.values():
            lines.append(f"     - error: {curve}" if isinstance(curve, Exception) else f"     - {curve[step]:.3e}")
    return "\n".join(lines)


def write_doc_tables(
    directory: str,
    learning_rate: float = DEFAULT_LEARNING_RATE,
    warmup_steps: int = DEFAULT_WARMUP_STEPS,
    total_steps: int = DEFAULT_TOTAL_STEPS,
) -> List[str]:
    """Write the docs' tables of the newer schedules into ``directory``, as RST ``list-table`` files.

    ``table_sequential_plateau.txt``: ``"sequential"`` and
    ``"reduce_lr_on_plateau"`` (with :func:`showcase_options`);
    ``table_lr_warmup_init.txt``: :func:`warmup_init_schedules`. Each lists
    the lr at :func:`characteristic_steps`, read from real schedulers.

    Returns:
        The paths written.
    """
    os.makedirs(directory, exist_ok=True)
    last_step = total_steps + max(1, total_steps // 10)
    points = characteristic_steps(warmup_steps, total_steps)
    shown = ("sequential", "reduce_lr_on_plateau")
    newer = [schedule for schedule in registry_schedules(learning_rate, warmup_steps, total_steps)
             if schedule[0] in shown]
    tables = [
        ("table_sequential_plateau.txt", newer),
        # "from <init>" keeps the headers narrow enough to wrap in a page's column
        ("table_lr_warmup_init.txt", [(label.replace("lr_warmup_init=", "from "), stem, factory)
                                      for label, stem, factory in
                                      warmup_init_schedules(learning_rate, warmup_steps, total_steps)]),
    ]
    written = []
    for file_name, schedules in tables:
        path = os.path.join(directory, file_name)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(format_rst_table(_curves(schedules, last_step, total_steps), points) + "\n")
        written.append(path)
    return written


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
        warnings.filterwarnings("ignore", message=f".*{LONG_WARMUP_TEXT}", category=UserWarning)
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
