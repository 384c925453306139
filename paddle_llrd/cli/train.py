"""``python -m paddle_llrd train CONFIG.yaml [key=value ...]``: PaddleFormers'
own ``paddleformers-cli train`` workflows, trained by :class:`LLRDTrainer`.

The config is the CLI's YAML (or JSON) as it is, ``stage``, ``fine_tuning``,
``train_dataset_path`` and all, plus any of paddle_llrd's fields
(``layerwise_decay``, ``layer_map``, any registered ``lr_scheduler_type`` with
``lr_scheduler_kwargs``, ``weight_decay_end``/``weight_decay_incr_style``,
``ema_decay``/``ema_warmup``/``ema_eval``); ``key=value`` pairs after the file override it,
as with ``paddleformers-cli``. The workflow that runs is PaddleFormers' own
for the ``stage`` (its data pipeline and collators, LoRA, checkpoint
detection and resume, saving), with two of its classes replaced for the
run (:mod:`paddle_llrd.cli.train_workflows`, imported only once the config
has passed its checks).

This module is the command line: its parser and :func:`main`, which needs
no PaddleFormers to show ``--help``. The parts it calls on are modules of
their own: :mod:`paddle_llrd.cli.train_config` (reading the config, the
arguments class and the defaults the command chooses; the part that imports
PaddleFormers), :mod:`paddle_llrd.cli.train_checks` (the config's checks),
:mod:`paddle_llrd.cli.train_outputs` (what ``output_dir`` holds: a finished
run, the checkpoint to resume), :mod:`paddle_llrd.cli.train_launch` (several
ranks) and :mod:`paddle_llrd.cli.train_console` (what the console shows).

Before anything loads, the config is checked (keys, stage, paddle_llrd's
fields, model folder, dataset paths), and so are the command line (an
override written as a ``--key value`` flag), the ranks (DPO needs two) and
``output_dir`` (a finished model a run would train over, checkpoints that
are incomplete); the command line says a mistake in one line on stderr with
exit status 2, with nothing before it. A config whose output already holds
its finished run is left alone; a run killed after its final checkpoint has
its final model and ``ema/`` written from that checkpoint.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

from paddle_llrd.cli.argparse_types import integer_at_least
from paddle_llrd.cli.train_console import Console, final_summary, log_path, output_to_log
from paddle_llrd.cli.train_env import train_environment_error
from paddle_llrd.cli.train_launch import check_world_size, is_launched_rank, launch_ranks, rank, visible_gpus, world_size
from paddle_llrd.cli.train_outputs import ResumePlan, check_nothing_is_overwritten, finished_step, resume_plan
from paddle_llrd.integrations.resume import CheckpointResumeError
from paddle_llrd.integrations.training_arguments import LLRDArgumentsMixin

__all__ = ["PROG", "flag_style_overrides", "main", "run_workflow"]

PROG = "python -m paddle_llrd train"


def _keys_help() -> str:
    """One line per LLRDTrainingArguments field: its name, its help, its default."""
    lines = ["paddle_llrd's keys (LLRDTrainingArguments' fields), besides every paddleformers-cli key:"]
    for spec in dataclasses.fields(LLRDArgumentsMixin):
        default = spec.default_factory() if spec.default_factory is not dataclasses.MISSING else spec.default
        lines.append(f"  {spec.name:<24} {spec.metadata['help']} (default: {default!r})")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        # argparse calls overrides required when config is missing: the usage says what is
        usage=f"{PROG} [-h] [--nproc_per_node N] [--verbose] config [key=value ...]",
        description="Run PaddleFormers' CLI workflow for the config's stage (SFT, PT, DPO; full or LoRA)\n"
                    "with LLRDTrainer: the CLI's YAML plus layerwise_decay, layer_map, registry schedules,\n"
                    "weight-decay ramps and EMA. The console shows the run's settings, its progress and\n"
                    f"where it wrote what; PaddleFormers' own output goes to {log_path('<output_dir>')}.",
        epilog=_keys_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("config", nargs="?", help="the paddleformers-cli config file (.yaml, .yml or .json)")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="optional pairs that override the file's entries")
    parser.add_argument(
        "--nproc_per_node", type=integer_at_least(1), default=None, metavar="N",
        help="ranks to start through paddle.distributed.launch (default: every visible GPU with device gpu, "
             "else 1, in this process)",
    )
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="print PaddleFormers' own output (its argument dump, debug lines) here too")
    return parser


def flag_style_overrides(argv: List[str], parser: argparse.ArgumentParser) -> List[Tuple[str, str]]:
    """The ``--key value`` (or ``--key=value``) words of ``argv`` that are no
    flag of ``parser``: each as ``(what was written, the key=value override
    meant)``. A flag without a value (followed by another flag, or last) is
    ``key=true``.

    Examples:
        >>> flag_style_overrides(["sft.yaml", "--layerwise_decay", "0.9", "--nproc_per_node", "2"], _parser())
        [('--layerwise_decay 0.9', 'layerwise_decay=0.9')]
        >>> flag_style_overrides(["sft.yaml", "--max_steps=40", "--do_eval"], _parser())
        [('--max_steps=40', 'max_steps=40'), ('--do_eval', 'do_eval=true')]
    """
    known = {option for action in parser._actions for option in action.option_strings}
    found = []
    index = 0
    while index < len(argv):
        word = argv[index]
        index += 1
        if not word.startswith("--") or word == "--" or word.split("=", 1)[0] in known:
            continue
        key, equals, value = word[2:].partition("=")
        if equals:
            found.append((word, f"{key}={value}"))
        elif index < len(argv) and not argv[index].startswith("--"):
            found.append((f"{word} {argv[index]}", f"{key}={argv[index]}"))
            index += 1
        else:
            found.append((word, f"{key}=true"))
    return found


def _refuse(error: BaseException) -> int:
    """A user's mistake as one line on stderr, argparse's way (exit status 2)."""
    message = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
    return 2


def run_workflow(config: Dict[str, Any], chosen: Optional[Dict[str, Tuple[Any, Any, str]]] = None) -> None:
    """Run PaddleFormers' workflow for ``config["stage"]`` in this process with
    :class:`~paddle_llrd.cli.train_config.LLRDFinetuningArguments` and the LLRD trainers; ``chosen`` (from
    :func:`~paddle_llrd.cli.train_config.choose_unset_keys`, already in ``config``) is announced with the
    changed defaults.

    Raises:
        ImportError: PaddleFormers does not import here (the message says how to set it up).
        ValueError, TypeError: what :func:`~paddle_llrd.cli.train_checks.check_config`
            refuses before anything loads (a key no arguments class knows, a
            ``stage`` whose workflow trains with a trainer of its own, such
            as ``ernie_pretrain``, a bad value of paddle_llrd's fields, a
            missing model folder or dataset), then what PaddleFormers refuses
            while it builds the arguments.
        CheckpointResumeError: a checkpoint the run cannot resume.
    """
    from paddle_llrd.cli.train_checks import check_config
    from paddle_llrd.cli.train_config import train_arguments_classes

    _run_checked(check_config(config, train_arguments_classes()), chosen or {})


def _run_checked(config: Dict[str, Any], chosen: Dict[str, Tuple[Any, Any, str]],
                 console: Optional[Console] = None) -> Any:
    """:func:`run_workflow` for a config that :func:`check_config` has
    returned; with ``console``, the trainers report to it (the callback comes back)."""
    from paddle_llrd.cli.train_config import announce_changed_defaults

    announce_changed_defaults(config, chosen)
    from paddle_llrd.cli import train_workflows  # seconds of imports: only once the config has passed

    return train_workflows.run_tuner(config, console)


def _headline(config_path: str, config: Dict[str, Any], log: str, max_steps: int) -> str:
    """The console's first line: what runs, where it writes, where PaddleFormers' output goes."""
    what = f"{config['stage']}" + (f" ({config['fine_tuning']})" if config.get("fine_tuning") else "")
    return (f"paddle_llrd train {config_path}: {what} of {config.get('model_name_or_path')} on "
            f"{config.get('device', 'gpu')}, {max_steps} steps into {config.get('output_dir')}; "
            f"PaddleFormers' output in {log} (--verbose prints it here)")


def _train_from_the_command_line(config: Dict[str, Any], chosen: Dict[str, Tuple[Any, Any, str]],
                                 config_path: str, verbose: bool, plan: ResumePlan) -> int:
    """One process's run of :func:`main`: the console shows the settings, the
    progress and the outputs; PaddleFormers' own output goes to the log file
    (and to the console too with ``verbose``)."""
    from paddle_llrd.cli.train_config import IMPORT_OUTPUT, paddleformers_default, raised_while_building_arguments

    this_rank = rank()
    console = Console() if this_rank == 0 else Console(open(os.devnull, "w"))
    log = log_path(str(config["output_dir"]), this_rank)
    max_steps = int(config.get("max_steps", paddleformers_default("max_steps")))
    console.line(_headline(config_path, config, log, max_steps))
    for line in _resume_lines(plan, config):
        console.line(line)
    quiet = contextlib.nullcontext() if verbose else output_to_log(log, console, preamble=IMPORT_OUTPUT.text)
    try:
        with quiet:
            seen = _run_checked(config, chosen, console)
    except CheckpointResumeError as exc:  # a checkpoint the run cannot go on from (other settings, ...)
        return _refuse(exc)
    except (ValueError, TypeError) as exc:
        if not raised_while_building_arguments(exc):
            print(f"{PROG}: the run failed; PaddleFormers' output is in {log}", file=sys.stderr, flush=True)
            raise
        return _refuse(exc)
    except BaseException:
        print(f"{PROG}: the run failed; PaddleFormers' output is in {log}", file=sys.stderr, flush=True)
        raise
    if seen is not None:
        for line in final_summary(str(config["output_dir"]), log, seen):
            console.line(line)
    return 0


def _resume_lines(plan: ResumePlan, config: Dict[str, Any]) -> List[str]:
    """What the console says about the checkpoint the run resumes: each folder skipped on the way, and
    a run finished at that checkpoint whose final save is to be written."""
    lines = list(plan.notices)
    if plan.completes:
        lines.append(f"{plan.checkpoint} is at the run's final step but the final model in {config['output_dir']} "
                     f"is incomplete ({plan.final_problem}): writing it and its ema/ from that checkpoint, training "
                     "no step")
    return lines


def _already_finished(config: Dict[str, Any], step: int) -> int:
    # Also when other settings changed (an override such as layerwise_decay=0.9): say how to use them.
    print(f"output_dir {str(config['output_dir'])!r} already holds a run finished at step {step}; nothing to "
          "do. To train again (with other settings too), write to a new output_dir (output_dir=PATH) or start "
          "over here (overwrite_output_dir=true)", flush=True)
    return 0


def _checked_config(options: argparse.Namespace, on_cuda: bool) -> Dict[str, Any]:
    """The config of the command line, read, checked and fit for this machine.

    Raises:
        OSError, ValueError, TypeError: a mistake in it, in one line.
    """
    from paddle_llrd.cli.train_checks import check_config
    from paddle_llrd.cli.train_config import check_device_keys, read_config, train_arguments_classes

    config = check_config(read_config(options.config, options.overrides), train_arguments_classes())
    check_device_keys(config, on_cuda)
    return config


def main(argv: Optional[List[str]] = None) -> int:
    """The ``train`` command: ``python -m paddle_llrd train CONFIG [key=value ...]``.

    A mistake in the command or the config (a missing file, model folder or
    dataset, a misspelt key, a bad value, a ``--key value`` meant as an
    override, DPO in one process, a run that would overwrite a finished
    model, a checkpoint that is incomplete) is one line on stderr and exit
    status 2, before any model loads; so is a PaddleFormers that does not
    import (``--help`` needs none).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    flags = flag_style_overrides(argv, parser)
    if flags:
        written, meant = zip(*flags)
        return _refuse(ValueError(
            f"{', '.join(written)}: config overrides are key=value pairs, as with paddleformers-cli, not flags; "
            f"write {' '.join(meant)}"
        ))
    options = parser.parse_intermixed_args(argv)
    if options.config is None:
        parser.error("the following arguments are required: config")
    try:
        from paddle_llrd.cli import train_config
    except ImportError as exc:  # PaddleFormers or its CLI extras absent, or the pins wrong
        return _refuse(train_environment_error("train", exc))
    on_cuda = train_config.cuda_available()
    try:
        config = _checked_config(options, on_cuda)
    except (OSError, ValueError, TypeError) as exc:
        return _refuse(exc)
    chosen = train_config.choose_unset_keys(config, on_cuda)
    config.update({key: value for key, (_, value, _) in chosen.items()})
    device = train_config.device_type(config, on_cuda)
    nproc = options.nproc_per_node
    if nproc is None:
        nproc = max(1, len(visible_gpus())) if device == "gpu" else 1
    max_steps = int(config.get("max_steps", train_config.paddleformers_default("max_steps")))
    try:
        check_world_size(config, world_size(nproc))
        done = finished_step(config, max_steps)
        if done is not None:
            return _already_finished(config, done)
        plan = resume_plan(config, max_steps)
        check_nothing_is_overwritten(config)
    except ValueError as exc:
        return _refuse(exc)
    if nproc > 1 and not is_launched_rank():
        rank_argv = [options.config, *options.overrides] + (["--verbose"] if options.verbose else [])
        return launch_ranks(nproc, device, rank_argv, options.verbose)
    if plan.checkpoint is not None:  # the newest complete one: not PaddleFormers' choice, the highest number
        config["resume_from_checkpoint"] = plan.checkpoint
    return _train_from_the_command_line(config, chosen, options.config, options.verbose, plan)
