"""The schedule figures and tables of the documentation, drawn at build time by ``docs/conf.py``.

Every lr is read from a real scheduler (:func:`paddle_llrd.schedules.curve.lr_curve`),
never from a formula; the plots are those of ``python -m paddle_llrd schedules``.
"""
from __future__ import annotations

import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from paddle.optimizer.lr import LRScheduler

from paddle_llrd.cli.schedules import draw_curves, legend_below, matplotlib_figure, plot_schedules, save_figure
from paddle_llrd.schedules import registry
from paddle_llrd.schedules.functions import DEFAULT_INVERSE_SQRT_TIMESCALE
from paddle_llrd.cli.schedule_table import (
    DEFAULT_LEARNING_RATE,
    DEFAULT_TOTAL_STEPS,
    DEFAULT_WARMUP_STEPS,
    Curve,
    Schedule,
    characteristic_steps,
    class_schedules,
    registry_schedules,
    schedule_curves,
    warmup_init_schedules,
    wsd_style_schedules,
)

__all__ = ["format_rst_table", "write_doc_figures", "write_doc_tables"]


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
        (f"warmup {warmup_steps} (timescale {warmup_steps or DEFAULT_INVERSE_SQRT_TIMESCALE})",
         "isr_warmup", factory(warmup_steps, None)),
        (f"no warmup (timescale {DEFAULT_INVERSE_SQRT_TIMESCALE})", "isr_default", factory(0, None)),
        (f"no warmup, timescale={short}", "isr_short", factory(0, short)),
    ]


def _hugging_face_wsd_schedules(learning_rate: float, warmup_steps: int, total_steps: int) -> List[Schedule]:
    """``"warmup_stable_decay"`` with Hugging Face's keywords: three warmup/decay types, the last 30 %
    decaying, the warmup from a tenth of the peak."""
    decay = int(0.3 * total_steps)

    def factory(warmup_type: str, decay_type: str) -> Callable[[], LRScheduler]:
        return lambda: registry.get_scheduler(
            "warmup_stable_decay", learning_rate, num_warmup_steps=warmup_steps, num_training_steps=total_steps,
            num_decay_steps=decay, warmup_type=warmup_type, decay_type=decay_type, min_lr_ratio=0.1,
        )

    pairs = [("linear", "cosine"), ("cosine", "1-sqrt"), ("1-sqrt", "linear")]
    return [(f"warmup {w}, decay {d}", f"hf_wsd_{w}_{d}", factory(w, d)) for w, d in pairs]


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
    ``registry_warmup_stable_decay_hugging_face.png`` Hugging Face's warmup and decay types,
    ``registry_cosine_with_restarts_cycles.png`` three ``num_cycles`` and
    ``registry_inverse_sqrt_timescales.png`` the ``timescale`` with and
    without warmup, ``registry_lr_warmup_init.png``
    :func:`warmup_init_schedules`.

    Returns:
        The paths written, ``schedules.png`` first.
    """
    Figure = matplotlib_figure()
    written = [plot_schedules(os.path.join(directory, "schedules.png"), learning_rate, warmup_steps, total_steps)]
    last_step = total_steps + max(1, total_steps // 10)
    groups = [
        ("warmup_stable_decay: the decay styles", "registry_warmup_stable_decay_styles", wsd_style_schedules),
        ("warmup_stable_decay: Hugging Face's types", "registry_warmup_stable_decay_hugging_face",
         _hugging_face_wsd_schedules),
        ("cosine_with_restarts: num_cycles", "registry_cosine_with_restarts_cycles", _restart_cycle_schedules),
        ("inverse_sqrt: warmup and timescale", "registry_inverse_sqrt_timescales", _inverse_sqrt_timescale_schedules),
        ("lr_warmup_init: the warmup starts above 0", "registry_lr_warmup_init", warmup_init_schedules),
    ]
    for title, stem, make_schedules in groups:
        curves = schedule_curves(make_schedules(learning_rate, warmup_steps, total_steps), last_step, total_steps)
        figure = Figure(figsize=(5.5, 4.2), layout="constrained")
        axes = figure.subplots()
        draw_curves(axes, curves, title, warmup_steps, total_steps)
        legend_below(axes)
        written.append(save_figure(figure, os.path.join(directory, f"{stem}.png")))
    schedules = registry_schedules(learning_rate, warmup_steps, total_steps) + class_schedules(
        learning_rate, warmup_steps, total_steps
    )
    for label, stem, factory in schedules:
        curves = schedule_curves([(label, stem, factory)], last_step, total_steps)
        if isinstance(curves[label], Exception):
            continue
        figure = Figure(figsize=(5.5, 3.2), layout="constrained")
        axes = figure.subplots()
        draw_curves(axes, curves, label, warmup_steps, total_steps)
        written.append(save_figure(figure, os.path.join(directory, f"{stem}.png")))
    return written


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
            handle.write(format_rst_table(schedule_curves(schedules, last_step, total_steps), points) + "\n")
        written.append(path)
    return written
