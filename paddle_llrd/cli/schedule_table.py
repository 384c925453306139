"""Every schedule's lr at characteristic steps: the curves and tables behind ``python -m paddle_llrd schedules``.

:func:`registry_schedules` lists each schedule registered in
:data:`paddle_llrd.TYPE_TO_SCHEDULER_FUNCTION` (built with
:func:`paddle_llrd.get_scheduler`, as PaddleNLP's Trainer builds it);
:func:`class_schedules` the scheduler classes. Each curve is read step by
step from a real scheduler (:func:`paddle_llrd.schedules.curve.lr_curve`), as
an optimizer sees it, never from a formula; :func:`format_table` prints the
lr at :func:`characteristic_steps` (step 0, half way through warmup, the end
of warmup, 25/50/75/100 % of training and past the end). The docs' figures
and tables (``docs/_figures.py``) are drawn from these too.

Options left unset keep each schedule's own defaults; an option goes only to
the schedules that take it (:func:`paddle_llrd.schedule_options`).
``"cosine_with_min_lr"``, which needs a floor, is shown with
``min_lr_rate=0.1`` unless ``min_lr`` or ``min_lr_rate`` is given.
``"sequential"`` and ``"reduce_lr_on_plateau"`` need more than a peak, a
warmup and a length, and are shown with :func:`showcase_options`.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from paddle.optimizer.lr import LRScheduler

from paddle_llrd.schedules import registry
from paddle_llrd.schedules import warmup as classes
from paddle_llrd.schedules.curve import lr_curve

__all__ = [
    "characteristic_steps",
    "plateau_metric",
    "showcase_options",
    "registry_schedules",
    "class_schedules",
    "wsd_style_schedules",
    "warmup_init_schedules",
    "schedule_curves",
    "format_table",
]

DEFAULT_LEARNING_RATE = 5e-5
DEFAULT_WARMUP_STEPS = 100
DEFAULT_TOTAL_STEPS = 1000
#: The floor ``"cosine_with_min_lr"`` is shown with when no other is given (it has no default).
DEFAULT_MIN_LR_RATE = 0.1

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


#: Options the table does not give a schedule that takes them: "warmup_stable_decay" is shown with
#: Megatron-LM's keywords (--decay-style, --min-lr), and would read --num-cycles as Hugging Face's.
_SHOWN_WITHOUT = {"warmup_stable_decay": ("num_cycles",)}


def _options_taken_by(name: str, options: Dict[str, Any]) -> Dict[str, Any]:
    """Those of ``options`` that schedule ``name`` takes (all of them if it takes ``**kwargs``)."""
    info = registry.schedule_info(name)
    if info.any_option:
        return dict(options)
    return {key: value for key, value in options.items() if key in info.options}


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

    def factory(name: str) -> Callable[[], LRScheduler]:
        shared = {key: value for key, value in common.items() if key not in _SHOWN_WITHOUT.get(name, ())}
        options = {"num_warmup_steps": warmup_steps, **shared, **_options_taken_by(name, extras),
                   **showcase_options(name, learning_rate, warmup_steps, total_steps)}
        return lambda: registry.get_scheduler(name, learning_rate, num_training_steps=total_steps, **options)

    return [
        (str(key), f"registry_{key}", factory(str(key)))
        for key in list(registry.TYPE_TO_SCHEDULER_FUNCTION)
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
        ("LinearDecayWithWarmup", "LinearDecayWithWarmup", lambda: classes.LinearDecayWithWarmup(lr, total, warmup)),
        ("ConstScheduleWithWarmup", "ConstScheduleWithWarmup", lambda: classes.ConstScheduleWithWarmup(lr, warmup)),
        ("CosineDecayWithWarmup", "CosineDecayWithWarmup", lambda: classes.CosineDecayWithWarmup(lr, total, warmup)),
        (
            "CosineDecayWithWarmup, num_cycles=2",
            "CosineDecayWithWarmup_num_cycles",
            lambda: classes.CosineDecayWithWarmup(lr, total, warmup, num_cycles=2),
        ),
        (
            "CosineDecayWithWarmup, hard restarts, num_cycles=2.0",
            "CosineDecayWithWarmup_hard_restarts",
            lambda: classes.CosineDecayWithWarmup(lr, total, warmup, with_hard_restarts=True, num_cycles=2.0),
        ),
        (
            "PolyDecayWithWarmup, lr_end=lr/10, power=2",
            "PolyDecayWithWarmup",
            lambda: classes.PolyDecayWithWarmup(lr, total, warmup, lr_end=floor, power=2.0),
        ),
        (
            "CosineAnnealingWithWarmupDecay, min_lr=lr/10",
            "CosineAnnealingWithWarmupDecay",
            lambda: classes.CosineAnnealingWithWarmupDecay(lr, floor, warmup, total),
        ),
        (
            "LinearAnnealingWithWarmupDecay, min_lr=lr/10",
            "LinearAnnealingWithWarmupDecay",
            lambda: classes.LinearAnnealingWithWarmupDecay(lr, floor, warmup, total),
        ),
        (
            "InverseSquareRootSchedule",
            "InverseSquareRootSchedule",
            lambda: classes.InverseSquareRootSchedule(max(1, warmup), lr),
        ),
    ]


def schedule_curves(schedules: Sequence[Schedule], last_step: int, total_steps: int) -> Dict[str, Curve]:
    """Each schedule's :func:`lr_curve` by label; a ``ReduceOnPlateau`` is stepped on :func:`plateau_metric`.

    A schedule that these settings do not fit gets its exception instead of a curve.
    """
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


