"""What ``python -m paddle_llrd train`` prints, and where the rest goes.

PaddleFormers prints ~1,000 lines for a 4-step run (its argument dump
twice, the model config, debug lines) and its imports print notices of
their own. The command keeps the console for what a user reads: the run's
settings (:func:`run_summary`), its progress (:class:`ConsoleCallback`: each
log, evaluation and checkpoint) and where things were written
(:func:`final_summary`); everything else goes, whole, to the log file
:data:`LOG_NAME` in ``output_dir`` (:func:`output_to_log`). The package's
warnings (:class:`~paddle_llrd.LLRDWarning`) reach both. With several ranks,
``paddle.distributed.launch``'s own settings and notices go to
:data:`LAUNCH_LOG_NAME` in its log directory, and rank 0's console reaches
the console (:func:`relay_launch`).
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, TextIO

from paddle_llrd.integrations.builders import warmup_steps
from paddle_llrd.integrations.checkpoints import incompleteness, read_manifest
from paddle_llrd.integrations.layer_logging import group_lr_ratios, inner_optimizer
from paddle_llrd.layer_decay.group_names import layer_group_names
from paddle_llrd.warning_classes import LLRDWarning

__all__ = [
    "LAUNCH_LOG_NAME",
    "LOG_NAME",
    "CapturedOutput",
    "Console",
    "ConsoleCallback",
    "captured_output",
    "final_summary",
    "launcher_line_shown",
    "log_path",
    "output_to_log",
    "relay_launch",
    "run_summary",
]

#: The log file in ``output_dir``: everything PaddleFormers and the imports print (rank 0; rank r adds ``.rank<r>``).
LOG_NAME = "train.log"
#: The file in the launcher's log directory that gets everything ``paddle.distributed.launch`` prints.
LAUNCH_LOG_NAME = "launch.log"
# logs keys shown on a progress line, in this order (the per-group lrs and norms stay in the log and VisualDL)
_PROGRESS_KEYS = ("loss", "learning_rate", "grad_norm", "weight_decay")


def log_path(output_dir: str, rank: int = 0) -> str:
    """Where a rank's log goes: ``<output_dir>/train.log``, ``train.rank<r>.log`` for rank ``r > 0``.

    Examples:
        >>> log_path("./out"), log_path("./out", 1)
        ('./out/train.log', './out/train.rank1.log')
    """
    name = LOG_NAME if rank == 0 else LOG_NAME.replace(".log", f".rank{rank}.log")
    return os.path.join(output_dir, name)


def launcher_line_shown(line: str, launcher_started: bool) -> bool:
    """Whether a line ``paddle.distributed.launch`` prints reaches the console.

    Before its first ``LAUNCH`` line the launcher is importing Paddle (whose
    notices, such as "No ccache found", stay in the log); its ``LAUNCH INFO``
    lines (its ~30 settings, its pod's progress) stay in the log too. Its
    warnings and errors and the lines it relays from rank 0 (the run's
    console) are shown.

    Examples:
        >>> launcher_line_shown("UserWarning: No ccache found.", launcher_started=False)
        False
        >>> launcher_line_shown("LAUNCH INFO 2026-01-01 00:00:00,000 nproc_per_node: 2", launcher_started=True)
        False
        >>> launcher_line_shown("LAUNCH ERROR 2026-01-01 00:00:00,000 Exit code 1", launcher_started=True)
        True
        >>> launcher_line_shown("step 1/4: saved ./out/checkpoint-1", launcher_started=True)
        True
    """
    return launcher_started and not line.startswith("LAUNCH INFO")


def relay_launch(command: List[str], env: Dict[str, str], log_dir: str, verbose: bool = False,
                 console: Optional[TextIO] = None) -> int:
    """Run the launcher ``command``: every line it prints goes to ``<log_dir>/launch.log``, and those of
    :func:`launcher_line_shown` (all of them with ``verbose``) to ``console`` (stdout); its exit status.

    Examples:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as log_dir:
        ...     status = relay_launch([sys.executable, "-c", "print('a notice'); print('LAUNCH INFO set-up'); "
        ...                            "print('step 1/1: saved ./out/checkpoint-1')"], dict(os.environ), log_dir)
        ...     logged = open(os.path.join(log_dir, LAUNCH_LOG_NAME)).read().splitlines()
        step 1/1: saved ./out/checkpoint-1
        >>> status, logged
        (0, ['a notice', 'LAUNCH INFO set-up', 'step 1/1: saved ./out/checkpoint-1'])
    """
    console = console if console is not None else sys.stdout
    os.makedirs(log_dir, exist_ok=True)
    with open(os.path.join(log_dir, LAUNCH_LOG_NAME), "w", encoding="utf-8") as log:
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   errors="replace", bufsize=1)
        try:
            _relay(process.stdout, log, console, verbose)
        finally:
            status = process.wait()
    return status


def _relay(lines: Iterable[str], log: TextIO, console: TextIO, verbose: bool) -> None:
    started = False
    for line in lines:
        log.write(line)
        log.flush()
        started = started or line.startswith("LAUNCH")
        if verbose or launcher_line_shown(line, started):
            console.write(line)
            console.flush()


@dataclass
class CapturedOutput:
    """What the file descriptors 1 and 2 received inside :func:`captured_output`."""

    text: str = ""


@contextlib.contextmanager
def captured_output() -> Iterator[CapturedOutput]:
    """Everything written to stdout and stderr inside the block, at the file
    descriptors (so a C library's and a child's output too), kept in the
    yielded :class:`CapturedOutput` instead of printed.

    Examples:
        >>> with captured_output() as captured:
        ...     _ = os.write(2, b"a notice\\n")  # as a C library or a child process writes
        >>> captured.text
        'a notice\\n'
    """
    captured = CapturedOutput()
    with tempfile.TemporaryFile(mode="w+b") as sink, _fds_to(sink.fileno()):
        try:
            yield captured
        finally:
            _flush()
            sink.seek(0)
            captured.text = sink.read().decode("utf-8", errors="replace")


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


@contextlib.contextmanager
def _fds_to(target: int) -> Iterator[None]:
    """File descriptors 1 and 2 pointed at ``target`` inside the block, restored afterwards."""
    _flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        _flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


class Console:
    """The lines a user reads, written to the terminal's stdout even while
    the file descriptors point at the log (a duplicate taken at creation)."""

    def __init__(self, stream: Optional[TextIO] = None) -> None:
        self._stream = stream if stream is not None else os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
        self.log: Optional[TextIO] = None

    def line(self, text: str = "", *, logged: bool = True) -> None:
        """``text`` on the console (and, unless ``logged`` is false, in the log when one is open)."""
        self._stream.write(text + "\n")
        self._stream.flush()
        if self.log is not None and logged:
            self.log.write(f"[paddle_llrd train] {text}\n")
            self.log.flush()


@contextlib.contextmanager
def output_to_log(path: str, console: Console, preamble: str = "") -> Iterator[None]:
    """Inside the block, stdout and stderr go to the log file ``path``
    (``preamble`` first, e.g. what the imports printed), and each warning of
    the package (an :class:`~paddle_llrd.LLRDWarning`) also to ``console``;
    an exception leaves the block after the descriptors are back, so its
    traceback reaches the terminal."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        shown(message, category, filename, lineno, file, line)
        if issubclass(category, LLRDWarning):
            console.line(f"warning ({category.__name__}): {message}", logged=False)  # the log has it already

    with open(path, "a", buffering=1, encoding="utf-8") as log:
        log.write(preamble)
        log.flush()
        console.log = log
        warnings.showwarning = show
        try:
            with _fds_to(log.fileno()):
                yield
        finally:
            warnings.showwarning = shown
            console.log = None


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def run_summary(trainer: Any, model: Any, optimizer: Any) -> List[str]:
    """The settings of the run ``trainer`` starts: the model and its layer
    groups with their lr ratios and peak lrs, the schedule, the weight decay
    and the EMA."""
    args, settings = trainer.args, trainer.layer_settings
    trainable = [param for param in model.parameters() if not param.stop_gradient]
    lines = [f"model: {type(model).__name__}, {settings.n_layers} blocks, "
             f"{sum(int(param.size) for param in trainable):,} trainable parameters in {len(trainable)} tensors"]
    names = layer_group_names(model, settings.layer_map)
    ratios = group_lr_ratios(model, settings, inner_optimizer(optimizer), names)
    peak = float(args.learning_rate)
    if ratios:
        lines.append(f"layer groups (layerwise_decay {settings.layerwise_decay:g}): ratio, peak lr")
        lines += [f"  {name:<22} {ratio:<10.4g} {peak * ratio:.3e}" for name, ratio in ratios.items()]
        lines += [f"  ({tie})" for tie in names.ties if tie.group in ratios]
    else:
        lines.append(f"layer groups: every parameter at the schedule's lr (layerwise_decay {settings.layerwise_decay:g})")
    steps = int(getattr(trainer.state, "max_steps", 0) or args.max_steps)
    options = dict(getattr(args, "lr_scheduler_kwargs", None) or {})
    shown = f" {options}" if options else ""
    lines.append(f"schedule: {getattr(args.lr_scheduler_type, 'value', args.lr_scheduler_type)}{shown}, peak lr "
                 f"{peak:g}, {warmup_steps(args, steps)} warmup steps of {steps}")
    schedule = getattr(inner_optimizer(optimizer), "weight_decay_schedule", None)
    if schedule is not None:
        lines.append(f"weight decay: {schedule.start_wd:g} -> {schedule.end_wd:g} ({schedule.style})")
    else:
        lines.append(f"weight decay: {float(args.weight_decay):g}")
    ema = getattr(trainer, "ema", None)
    if ema is None:
        lines.append("EMA: off (ema_decay 0)")
    else:
        warmup = (f", timm warm-up (power {ema.warmup_power:.3g})" if ema.warmup
                  else f", no warm-up (covers about {1 / (1 - ema.decay):.0f} updates)")
        lines.append(f"EMA: ema_decay {ema.decay:g}{warmup}, saved to {os.path.join(args.output_dir, 'ema')}")
    return lines


def _trained_line(seen: "ConsoleCallback") -> str:
    """How many steps this run trained (a resumed run counts its own), how long, the train loss."""
    runtime = seen.train_metrics.get("train_runtime")
    took = f" in {runtime:.1f} s" if isinstance(runtime, (int, float)) else ""
    loss = seen.train_metrics.get("train_loss")
    resumed = f" (resumed at step {seen.start_step})" if seen.start_step else ""
    steps = seen.global_step - seen.start_step
    return (f"trained {steps} step{'s' * (steps != 1)}{resumed}{took}"
            + (f", train_loss {_number(loss)}" if loss is not None else ""))


def _final_save_complete(out: Path) -> bool:
    """Whether ``out`` holds a final save that finished (its manifest, which comes last, and every file it lists)."""
    return out.is_dir() and read_manifest(str(out)) is not None and incompleteness(str(out)) is None


def final_summary(output_dir: str, log: str, seen: "ConsoleCallback") -> List[str]:
    """Where the run wrote what: the final model, the EMA, the checkpoints and the log."""
    out = Path(output_dir)
    lines = []
    if seen.train_metrics:
        lines.append(_trained_line(seen))
    if seen.update_paths:
        lines.append(update_path_summary(seen.update_paths))
    written = []
    if _final_save_complete(out):
        written.append(f"the final model in {output_dir}")
    if (out / "ema").is_dir():
        written.append(f"its EMA in {os.path.join(output_dir, 'ema')}")
    checkpoints = sorted(out.glob("checkpoint-*"), key=lambda path: int(path.name.split("-")[-1]))
    if checkpoints:
        shown = checkpoints[0].name if len(checkpoints) == 1 else f"{checkpoints[0].name} ... {checkpoints[-1].name}"
        written.append(f"{len(checkpoints)} checkpoint{'s' * (len(checkpoints) > 1)} ({shown})")
    written.append(f"the full log in {log}")
    lines.append("wrote " + ", ".join(written))
    return lines


def update_path_summary(paths: Counter) -> str:
    """The update paths the optimizer's steps took (``AdamWDL.last_update_path`` after each):
    ``update path: fused at 4 of 4 steps``, with the reason of any other path.

    Examples:
        >>> from collections import Counter
        >>> update_path_summary(Counter({("fused", None): 4}))
        'update path: fused at 4 of 4 steps'
        >>> update_path_summary(Counter({("fused", None): 3, ("per_parameter", "an AMP overflow step"): 1}))
        'update path: fused at 3 of 4 steps, per-parameter at 1 (an AMP overflow step)'
    """
    total = sum(paths.values())
    shown = []
    for (path, reason), count in paths.most_common():
        name = path.replace("_", "-")
        shown.append(f"{name} at {count} of {total} steps" if not shown else f"{name} at {count}"
                     + (f" ({reason})" if reason else ""))
    return "update path: " + ", ".join(shown)


@dataclass
class ConsoleCallback:
    """Trainer callback: the run's settings when training begins, one line per
    training log, evaluation and checkpoint, the train metrics for
    :func:`final_summary`. Only the process that saves (rank 0) prints."""

    console: Console
    trainer: Any
    train_metrics: Dict[str, Any] = field(default_factory=dict)
    global_step: int = 0
    start_step: int = 0  # the step the run began at (a resumed run's checkpoint)
    update_paths: Counter = field(default_factory=Counter)  # AdamWDL.last_update_path after each step

    def _prints(self, args: Any) -> bool:
        return bool(getattr(args, "should_save", True))

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None,
                       **kwargs: Any) -> None:
        self.start_step = self.global_step = state.global_step
        if self._prints(args):
            for line in run_summary(self.trainer, model if model is not None else self.trainer.model, optimizer):
                self.console.line(line)
            if state.global_step:
                self.console.line(f"resumed at step {state.global_step}")

    def on_optimizer_end(self, args: Any, state: Any, control: Any, optimizer: Any = None, **kwargs: Any) -> None:
        path = getattr(optimizer, "last_update_path", None)
        if path is not None:
            self.update_paths[tuple(path)] += 1

    def on_log(self, args: Any, state: Any, control: Any, logs: Optional[Dict[str, Any]] = None,
               **kwargs: Any) -> None:
        logs = logs or {}
        self.global_step = state.global_step
        if "train_runtime" in logs:
            self.train_metrics = dict(logs)
            return
        if not self._prints(args):
            return
        at = f"step {state.global_step}/{state.max_steps}"
        if "loss" in logs:
            shown = [f"{key} {_number(logs[key])}" for key in _PROGRESS_KEYS if key in logs]
            self.console.line(f"{at}: " + ", ".join(shown))
        evaluated = {key: value for key, value in logs.items() if key.startswith("eval_") and "loss" in key}
        if evaluated:
            self.console.line(f"{at}: " + ", ".join(f"{key} {_number(value)}" for key, value in evaluated.items()))

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._prints(args):
            self.console.line(f"step {state.global_step}/{state.max_steps}: saved "
                              f"{os.path.join(args.output_dir, f'checkpoint-{state.global_step}')}")
