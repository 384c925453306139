"""What ``python -m paddle_llrd schedules`` must print: each schedule's lr by the
formulas of schedule_formulas.py with the table's defaults, and the parser of
the printed table (test_schedule_table.py, test_cli_errors.py).
"""
from __future__ import annotations

import re

import paddle

import schedule_formulas as formula


def paddle_plateau_lr(lr, total, s, min_lr):
    """Paddle's own ReduceOnPlateau (factor 0.5, patience total // 10) after the losses of steps 0..s-1:
    2 falling linearly to 1 at round(0.4 * total), flat afterwards (the table's documented metric)."""
    fall = max(1, round(0.4 * total))
    scheduler = paddle.optimizer.lr.ReduceOnPlateau(lr, factor=0.5, patience=total // 10, min_lr=min_lr)
    for step in range(s):
        scheduler.step(1.0 + max(0, fall - step) / fall)
    return scheduler()


def reference(name, lr, warmup, total, s, num_cycles=None, lr_end=1e-7, power=1.0, min_lr=None,
              min_lr_rate=None, decay_style="cosine", lr_warmup_init=0.0):
    """The formulas of schedule_formulas.py with the table's defaults: 0.5 cosine waves, 1 restart cycle,
    floor 0 (0.1 * lr for cosine_with_min_lr), timescale W (10 000 without warmup), the last 10 % decaying;
    sequential: inverse_sqrt for total // 2 steps, then cosine from lr / 2 over the rest, each from its step 0;
    reduce_lr_on_plateau: Paddle's class on the table's metric. ``lr_warmup_init``: Megatron-LM's warmup
    ``init + (lr - init) * s / W`` for s < W."""
    if lr_warmup_init and s < warmup and name not in ("constant", "reduce_lr_on_plateau"):
        return lr_warmup_init + (lr - lr_warmup_init) * s / warmup
    floor = min_lr or 0.0
    if name == "cosine_with_min_lr":
        floor = min_lr if min_lr is not None else lr * (0.1 if min_lr_rate is None else min_lr_rate)
    half = total // 2
    schedules = {
        "linear": lambda: formula.linear(lr, warmup, total, s),
        "cosine": lambda: formula.cosine(lr, warmup, total, s, 0.5 if num_cycles is None else num_cycles, floor),
        "cosine_with_min_lr": lambda: formula.cosine(
            lr, warmup, total, s, 0.5 if num_cycles is None else num_cycles, floor),
        "constant": lambda: lr,
        "constant_with_warmup": lambda: formula.constant_with_warmup(lr, warmup, s),
        "polynomial": lambda: formula.polynomial(lr, warmup, total, s, lr_end, power),
        "cosine_with_restarts": lambda: formula.hard_restarts(
            lr, warmup, total, 1.0 if num_cycles is None else num_cycles, s),
        "inverse_sqrt": lambda: formula.inverse_sqrt_timescale(lr, warmup, warmup or 10_000, s),
        "warmup_stable_decay": lambda: formula.wsd(lr, warmup, total, int(0.1 * total), decay_style, floor / lr, s),
        "cosine_annealing_with_warmup": lambda: formula.annealing(lr, floor, warmup, total, "cosine", s),
        "linear_annealing_with_warmup": lambda: formula.annealing(lr, floor, warmup, total, "linear", s),
        "sequential": lambda: (
            formula.inverse_sqrt_timescale(lr, warmup, warmup or 10_000, s) if s < half
            else formula.cosine(lr / 2, 0, total - half, s - half, 0.5 if num_cycles is None else num_cycles,
                                min_lr or 0.0)),
        "reduce_lr_on_plateau": lambda: paddle_plateau_lr(lr, total, s, min_lr or 0.0),
    }
    return schedules[name]()


def parse_rows(text):
    """``{schedule: [lr, ...]}`` from the table rows, and the steps of the header."""
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("schedule "))
    steps = [int(n) for n in re.findall(r"step (\d+)", header)]
    rows = {}
    for line in lines[lines.index(header) + 2:]:
        if not line.strip() or line.startswith("Plot") or line.startswith("No plot"):
            continue
        if "error:" in line:
            name = line.split("error:")[0].strip()
            rows[name] = line
            continue
        cells = line.split()
        numbers = [float(cell) for cell in cells[-len(steps):]]
        rows[" ".join(cells[: -len(steps)])] = numbers
    return steps, rows
