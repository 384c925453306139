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
run: the arguments class by :class:`LLRDFinetuningArguments` (the CLI's
``FinetuningArguments`` plus paddle_llrd's fields) and the trainer by a
subclass of the CLI's own trainer with :class:`LLRDTrainer` mixed in
(:mod:`paddle_llrd.cli.train_workflows`, imported only once the config has
passed its checks).

Before anything loads, the config is checked
(:mod:`paddle_llrd.cli.train_checks`: keys, stage, paddle_llrd's
fields, model folder, dataset paths), and so are the command line (an
override written as a ``--key value`` flag), the ranks (DPO needs two) and
``output_dir`` (a finished model a run would train over); the command line
says a mistake in one line on stderr with exit status 2, with nothing
before it. The console then shows what :mod:`paddle_llrd.cli.train_console`
prints (the run's settings, its progress, where it wrote what), and
PaddleFormers' own output goes to ``train.log`` in ``output_dir``.

``train`` trains what the config asks: a config without ``do_train`` trains,
and on a machine without CUDA a config that leaves ``device``,
``_attn_implementation`` and ``compute_type`` out runs on the CPU with eager
attention in float32 (see :func:`choose_unset_keys`); a key the config sets is
never changed, and one that cannot run here (``device: gpu`` without CUDA,
``_attn_implementation: flashmask`` on the CPU) is refused naming the key to
set. These choices and the defaults that differ from ``paddleformers-cli``'s
are printed as one warning at start, one line each with its reason (see
:func:`changed_defaults`). A config whose output already holds its final step
is left alone (see :func:`finished_step`), and one that would train over a
finished model is refused (see :func:`check_nothing_is_overwritten`).

One device trains in this process. Several GPUs (``device: gpu`` with more
than one visible, or ``--nproc_per_node N``) are started the way
``paddleformers-cli`` starts them, through ``paddle.distributed.launch``
running ``python -m paddle_llrd train`` on each rank; ``device: cpu`` with ``--nproc_per_node N``
starts N CPU ranks over gloo.

Examples:
    >>> choose_unset_keys({"output_dir": "out"}, on_cuda=False)["device"]
    ('gpu', 'cpu', 'this Paddle sees no CUDA device')
    >>> changed_defaults({"compute_type": "bf16"})
    {'save_checkpoint_format': ('flex_checkpoint', 'unified_checkpoint'), 'load_checkpoint_format': ('flex_checkpoint', 'unified_checkpoint')}
    >>> sorted(changed_defaults({"compute_type": "float32", "amp_master_grad": False}))
    ['load_checkpoint_format', 'save_checkpoint_format', 'sharding']
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shlex
import sys
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from paddle_llrd.cli.train_console import (
    LAUNCH_LOG_NAME,
    Console,
    captured_output,
    final_summary,
    log_path,
    output_to_log,
    relay_launch,
)
from paddle_llrd.cli.train_env import train_environment_error
from paddle_llrd.warning_classes import TrainerSettingWarning

# PaddleFormers prints notices while it imports ("PyTorch was not found", ...): the
# run's log gets them (IMPORT_OUTPUT.text), the console does not.
with captured_output() as IMPORT_OUTPUT:
    try:
        from paddleformers.cli.hparams import parser as cli_parser
        from paddleformers.cli.hparams.finetuning_args import FinetuningArguments
        from paddleformers.trainer.trainer_callback import TrainerState
        from paddleformers.trainer.trainer_utils import get_last_checkpoint
        from paddleformers.utils.env import TRAINER_STATE_NAME
        import yaml
        from omegaconf import OmegaConf
        from omegaconf.errors import OmegaConfBaseException

        from paddle_llrd.integrations.paddleformers import LLRDTrainingArguments
    except ImportError as exc:  # PaddleFormers or its CLI extras (omegaconf, ...) absent, or the pins wrong
        raise train_environment_error("train", exc) from exc

from paddle_llrd.cli.argparse_types import integer_at_least  # noqa: E402
from paddle_llrd.cli.train_checks import LLRD_STAGES, check_config, field_defaults  # noqa: E402
from paddle_llrd.integrations.training_arguments import LLRDArgumentsMixin  # noqa: E402

__all__ = [
    "IMPORT_OUTPUT",
    "LLRD_STAGES",
    "LLRDFinetuningArguments",
    "changed_defaults",
    "check_device_keys",
    "check_nothing_is_overwritten",
    "check_world_size",
    "choose_unset_keys",
    "cuda_available",
    "finished_step",
    "flag_style_overrides",
    "main",
    "read_config",
    "run_workflow",
    "train_arguments_classes",
]

# compute_type values that FinetuningArguments turns into bf16=False and fp16=False.
_NO_AMP_COMPUTE_TYPES = ("float32",)


def _uses_amp(compute_type: Any) -> bool:
    """Whether the CLI's ``compute_type`` switches AMP on: ``FinetuningArguments``
    sets ``bf16`` for every type but ``fp16`` (then ``fp16``) and ``float32``."""
    return compute_type not in _NO_AMP_COMPUTE_TYPES


@dataclass
class LLRDFinetuningArguments(LLRDTrainingArguments, FinetuningArguments):
    """The CLI's ``FinetuningArguments`` (``compute_type``, ``decay_steps``,
    the DPO fields, ...) with :class:`LLRDTrainingArguments`' fields and checks.

    ``amp_master_grad`` and ``sharding`` default by the AMP that
    ``compute_type`` selects, which ``FinetuningArguments`` resolves only in
    its own ``__post_init__``: with ``bf16``/``fp16`` (the CLI's default)
    they stay PaddleFormers' ``True`` and ``"stage1"``; with ``float32`` they
    are ``False`` (PaddleFormers refuses ``True`` without AMP) and ``""``.
    """

    def __post_init__(self) -> None:
        amp = _uses_amp(self.compute_type)
        if self.amp_master_grad is None:
            self.amp_master_grad = amp
        if self.sharding is None:
            self.sharding = _paddleformers_default("sharding") if amp else ""
        super().__post_init__()


def _paddleformers_default(name: str) -> Any:
    """The default ``paddleformers-cli`` gives ``name`` (a field of one of its arguments classes)."""
    return field_defaults(cli_parser._TRAIN_ARGS)[name]


def cuda_available() -> bool:
    """Whether this Paddle build can train on a CUDA device here."""
    import paddle

    return paddle.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0


def _device_type(config: Dict[str, Any], on_cuda: bool) -> str:
    """``cpu``, ``gpu``, ... : the config's ``device`` without its index, else what this machine has."""
    return str(config.get("device", "gpu" if on_cuda else "cpu")).split(":")[0]


def choose_unset_keys(config: Dict[str, Any], on_cuda: bool) -> Dict[str, Tuple[Any, Any, str]]:
    """What ``train`` puts in for keys the config leaves out where
    ``paddleformers-cli``'s default would not train here:
    ``{key: (paddleformers_default, chosen, reason)}``.

    ``do_train`` is ``True`` (the CLI's ``False`` prints the arguments and
    stops); without CUDA ``device`` is ``cpu``; on the CPU
    ``_attn_implementation`` is ``eager`` (flashmask dies there in
    ``flashmask_attention``: ``FLAGS_cudnn_deterministic cannot get its
    value``) and ``compute_type`` is ``float32`` (the CLI's ``bf16`` AMP needs
    a GPU). A key the config sets is never in the answer.

    Examples:
        >>> sorted(choose_unset_keys({"device": "cpu", "compute_type": "float32"}, on_cuda=True))
        ['_attn_implementation', 'do_train']
        >>> choose_unset_keys({"do_train": False}, on_cuda=True)
        {}
    """
    on_cpu = _device_type(config, on_cuda) == "cpu"
    wanted = [
        ("do_train", True, True, "the train command trains; paddleformers-cli's false only prints the arguments"),
        ("device", "cpu", not on_cuda, "this Paddle sees no CUDA device"),
        ("_attn_implementation", "eager", on_cpu, "flashmask attention needs a GPU"),
        ("compute_type", "float32", on_cpu, "bf16 and fp16 AMP need a GPU"),
    ]
    return {
        key: (_paddleformers_default(key), value, reason)
        for key, value, applies, reason in wanted
        if applies and key not in config
    }


def check_device_keys(config: Dict[str, Any], on_cuda: bool) -> None:
    """Refuse, naming the key to set, what cannot train on this machine.

    Raises:
        ValueError: ``device: gpu`` where no CUDA device is seen, or
            ``_attn_implementation: flashmask`` with ``device: cpu``.
    """
    device = _device_type(config, on_cuda)
    if device == "gpu" and not on_cuda:
        raise ValueError(
            f"device: {config.get('device')!r} but this Paddle sees no CUDA device; set device: cpu "
            "(or leave device out to train on the CPU)"
        )
    attention = str(config.get("_attn_implementation", "")).lower()
    if device == "cpu" and attention == "flashmask":
        raise ValueError("_attn_implementation: flashmask needs a GPU; set _attn_implementation: eager for device: cpu")


def changed_defaults(config: Dict[str, Any]) -> Dict[str, Tuple[Any, Any]]:
    """The fields the config leaves unset whose default here differs from
    ``paddleformers-cli``'s: ``{field: (paddleformers_default, default_here)}``.

    The checkpoint formats are ``unified_checkpoint`` (PaddleFormers'
    ``flex_checkpoint`` cannot resume in one process that has not initialised
    ``fleet``: ``AttributeError: 'Fleet' object has no attribute '_hcg'``);
    without AMP (``compute_type: float32``) ``amp_master_grad`` is ``False``
    (PaddleFormers' ``True`` raises ``ValueError: [ConfigConflict]`` there)
    and ``sharding`` is ``""`` (its ``stage1`` refuses several ranks without
    ``amp_master_grad``).
    """
    amp = _uses_amp(config.get("compute_type", _paddleformers_default("compute_type")))
    here = {
        "save_checkpoint_format": LLRDTrainingArguments.__dataclass_fields__["save_checkpoint_format"].default,
        "load_checkpoint_format": LLRDTrainingArguments.__dataclass_fields__["load_checkpoint_format"].default,
        "amp_master_grad": amp,
        "sharding": _paddleformers_default("sharding") if amp else "",
    }
    return {
        name: (_paddleformers_default(name), value)
        for name, value in here.items()
        if name not in config and value != _paddleformers_default(name)
    }


_REASONS = {
    "save_checkpoint_format": "PaddleFormers' flex_checkpoint does not resume in one process",
    "load_checkpoint_format": "PaddleFormers' flex_checkpoint does not resume in one process",
    "amp_master_grad": "compute_type float32 has no AMP, where PaddleFormers refuses amp_master_grad: true",
    "sharding": "without AMP PaddleFormers' stage1 cannot start on several ranks",
}


def _announce_changed_defaults(config: Dict[str, Any], chosen: Dict[str, Tuple[Any, Any, str]]) -> None:
    changed = {name: (old, new, _REASONS[name]) for name, (old, new) in changed_defaults(config).items()}
    if not chosen and not changed:
        return
    lines = [
        f"  {name}: {new!r} (paddleformers-cli: {old!r}) because {reason}"
        for name, (old, new, reason) in {**chosen, **changed}.items()
    ]
    message = (
        "paddle_llrd train changes these paddleformers-cli defaults; set them in the config to choose:\n"
        + "\n".join(lines)
    )
    warnings.warn(message, TrainerSettingWarning, stacklevel=3)


def read_config(path: str, overrides: List[str]) -> Dict[str, Any]:
    """The config file (``.yaml``/``.yml`` or ``.json``) as a dict, with
    ``key=value`` overrides (OmegaConf's dotted command-line syntax, as
    ``paddleformers-cli`` reads them) merged in.

    Raises:
        FileNotFoundError: ``path`` does not exist (or is a folder).
        ValueError: another file type, a file that does not parse (the
            message gives the line), a file that is not a mapping, or an
            override that is not ``key=value`` or does not merge.
    """
    file = Path(path)
    if file.suffix not in (".yaml", ".yml", ".json"):
        raise ValueError(f"CONFIG must be a .yaml, .yml or .json file, got {path!r}")
    if not file.is_file():
        state = "is a folder" if file.is_dir() else "does not exist"
        raise FileNotFoundError(f"CONFIG {path!r} {state} ({file.resolve()})")
    loaded = _parse_config_text(path, file.read_text(), json_file=file.suffix == ".json")
    if not isinstance(loaded, dict):
        found = "nothing" if loaded is None else type(loaded).__name__
        raise ValueError(f"CONFIG {path!r} must hold a mapping of argument names to values, got {found}")
    bad = [item for item in overrides if "=" not in item or item.startswith("=")]
    if bad:
        raise ValueError(f"overrides after CONFIG must be key=value, got {bad}")
    try:
        merged = OmegaConf.merge(OmegaConf.create(loaded), OmegaConf.from_cli(list(overrides)))
    except (OmegaConfBaseException, yaml.YAMLError) as exc:
        problem = getattr(exc, "problem", None) or str(exc)  # OmegaConf reads each value as YAML
        raise ValueError(f"overrides {list(overrides)} do not parse or merge into CONFIG {path!r}: {problem}") from None
    return OmegaConf.to_container(merged)


def _parse_config_text(path: str, text: str, *, json_file: bool) -> Any:
    """The file's YAML or JSON, or a ``ValueError`` saying where it does not parse."""
    try:
        return json.loads(text) if json_file else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"CONFIG {path!r} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ValueError(f"CONFIG {path!r} is not valid YAML: {problem}{where}") from None


def train_arguments_classes() -> List[type]:
    """The classes PaddleFormers' parser builds from the config, with :class:`LLRDFinetuningArguments`
    in place of the CLI's ``FinetuningArguments``."""
    return [LLRDFinetuningArguments if cls is FinetuningArguments else cls for cls in cli_parser._TRAIN_ARGS]


def _trained_steps(place: Path) -> Optional[Tuple[int, int]]:
    """``(global_step, max_steps)`` of the trainer state in ``place``: a checkpoint's
    ``trainer_state.bin`` (read as PaddleFormers resumes it) or the
    ``trainer_state.json`` the finished workflow writes beside the final model."""
    if (place / TRAINER_STATE_NAME).is_file():
        state = TrainerState.load(str(place / TRAINER_STATE_NAME))
        return int(state.global_step), int(state.max_steps)
    if (place / "trainer_state.json").is_file():
        state = json.loads((place / "trainer_state.json").read_text())
        return int(state.get("global_step", 0)), int(state.get("max_steps", 0))
    return None


def finished_step(config: Dict[str, Any]) -> Optional[int]:
    """The final step, when the checkpoint this config's run would resume from
    already holds it; else ``None``.

    PaddleFormers' workflow resumes from ``resume_from_checkpoint`` or from
    the last ``checkpoint-N`` in ``output_dir`` (unless ``overwrite_output_dir``),
    and a checkpoint at the final step still trains one step more and
    overwrites the final model and EMA. The final step is the config's
    ``max_steps`` when positive, else the one the run recorded; the states
    read are that checkpoint's and the one the finished workflow writes
    into ``output_dir`` beside the final model. A larger
    ``max_steps`` than the run reached is an interrupted run: ``None``.
    """
    if not config.get("do_train") or config.get("overwrite_output_dir") or "output_dir" not in config:
        return None
    output_dir = Path(str(config["output_dir"]))
    if config.get("resume_from_checkpoint"):
        places = [Path(str(config["resume_from_checkpoint"]))]
    elif output_dir.is_dir():
        last = get_last_checkpoint(str(output_dir))
        places = [output_dir] + ([Path(last)] if last is not None else [])
    else:
        return None
    max_steps = int(config.get("max_steps", _paddleformers_default("max_steps")))
    for place in places:
        steps = _trained_steps(place)
        if steps is None:
            continue
        global_step, recorded_final = steps
        final = max_steps if max_steps > 0 else recorded_final
        if final > 0 and global_step >= final:
            return global_step
    return None


# Files directly in output_dir that the workflow writes when it saves the final model.
_FINAL_MODEL_FILES = ("trainer_state.json", "*.safetensors", "*.safetensors.index.json", "*.pdparams")


def _final_model(output_dir: Path) -> List[str]:
    """What of a finished run ``output_dir`` holds: the final model's files and its ``ema/``."""
    found = sorted({path.name for pattern in _FINAL_MODEL_FILES for path in output_dir.glob(pattern) if path.is_file()})
    if (output_dir / "ema").is_dir():
        found.append("ema/")
    return found


def check_nothing_is_overwritten(config: Dict[str, Any]) -> None:
    """Refuse a run that would train from step 0 over a finished model.

    PaddleFormers' workflow trains from scratch when ``output_dir`` holds no
    checkpoint to resume from, and then overwrites whatever final model and
    EMA are there: a longer re-run of a config that saved no checkpoint
    (``save_steps`` beyond ``max_steps``) would lose them. Such a run stops
    here unless the config says where to go: ``resume_from_checkpoint``, a
    new ``output_dir`` or ``overwrite_output_dir``. (A re-run that would
    change nothing is :func:`finished_step`'s.)

    Raises:
        ValueError: ``output_dir`` holds a final model (or an EMA) and no
            ``checkpoint-N``, and neither ``resume_from_checkpoint`` nor
            ``overwrite_output_dir`` is set; the message says what is there
            and the three ways on.
    """
    if not config.get("do_train") or config.get("overwrite_output_dir") or config.get("resume_from_checkpoint"):
        return
    output_dir = Path(str(config.get("output_dir", "")))
    if not output_dir.is_dir() or get_last_checkpoint(str(output_dir)) is not None:
        return
    found = _final_model(output_dir)
    if not found:
        return
    steps = _trained_steps(output_dir)
    trained = f" trained for {steps[0]} steps" if steps is not None else ""
    raise ValueError(
        f"output_dir {str(config['output_dir'])!r} holds a finished model{trained} ({', '.join(found)}) and no "
        "checkpoint-N to resume from, so this run would train again from step 0 and overwrite it: resume from a "
        "checkpoint (resume_from_checkpoint=PATH), write to a new output_dir (output_dir=PATH), or start over "
        "here (overwrite_output_dir=true)"
    )


def check_world_size(config: Dict[str, Any], world_size: int) -> None:
    """Refuse a ``DPO`` (or ``VL-DPO``) run on one rank, before the model loads.

    Raises:
        ValueError: ``stage`` is a DPO stage and ``world_size`` is 1:
            PaddleFormers 1.2.0's DPO workflow wraps its reference model for
            data parallel, which fails in one process (``AttributeError:
            'Fleet' object has no attribute '_user_defined_strategy'``), its
            own launcher's too.

    Examples:
        >>> check_world_size({"stage": "SFT"}, 1)
        >>> check_world_size({"stage": "DPO"}, 1)
        Traceback (most recent call last):
        ...
        ValueError: stage DPO trains on two or more ranks: ... add --nproc_per_node 2 (a CPU runs them over gloo)
    """
    stage = str(config.get("stage", ""))
    if stage.endswith("DPO") and world_size < 2:
        raise ValueError(
            f"stage {stage} trains on two or more ranks: in one process PaddleFormers 1.2.0's DPO workflow fails "
            "wrapping its reference model for data parallel ('Fleet' object has no attribute "
            "'_user_defined_strategy'); add --nproc_per_node 2 (a CPU runs them over gloo)"
        )


def run_workflow(config: Dict[str, Any], chosen: Optional[Dict[str, Tuple[Any, Any, str]]] = None) -> None:
    """Run PaddleFormers' workflow for ``config["stage"]`` in this process with
    :class:`LLRDFinetuningArguments` and the LLRD trainers; ``chosen`` (from
    :func:`choose_unset_keys`, already in ``config``) is announced with the
    changed defaults.

    Raises:
        ValueError, TypeError: what :func:`~paddle_llrd.cli.train_checks.check_config`
            refuses before anything loads (a key no arguments class knows, a
            ``stage`` whose workflow trains with a trainer of its own, such
            as ``ernie_pretrain``, a bad value of paddle_llrd's fields, a
            missing model folder or dataset), then what PaddleFormers refuses
            while it builds the arguments.
    """
    _run_checked(check_config(config, train_arguments_classes()), chosen or {})


def _run_checked(config: Dict[str, Any], chosen: Dict[str, Tuple[Any, Any, str]],
                 console: Optional[Console] = None) -> Any:
    """:func:`run_workflow` for a config that :func:`check_config` has
    returned; with ``console``, the trainers report to it (the callback comes back)."""
    _announce_changed_defaults(config, chosen)
    from paddle_llrd.cli import train_workflows  # seconds of imports: only once the config has passed

    return train_workflows.run_tuner(config, console)


def _visible_gpus() -> List[str]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [device for device in visible.split(",") if device.strip()]
    import paddle

    if not paddle.is_compiled_with_cuda():
        return []
    return [str(index) for index in range(paddle.device.cuda.device_count())]


def _is_launched_rank() -> bool:
    return "PADDLE_TRAINER_ID" in os.environ and "PADDLE_TRAINERS_NUM" in os.environ


def _launch_command(nproc: int, device: str, argv: List[str]) -> Tuple[List[str], Dict[str, str]]:
    """``python -m paddle.distributed.launch ... python -m paddle_llrd train CONFIG ...``
    and its environment, as ``paddleformers-cli`` starts its ranks (log
    directory ``PADDLEFORMERS_DIST_LOG``, master ``MASTER_ADDR:MASTER_PORT``,
    ``NNODES``, ``RANK``)."""
    env = dict(os.environ)
    command = [
        sys.executable, "-m", "paddle.distributed.launch",
        "--log_dir", env.get("PADDLEFORMERS_DIST_LOG", "paddleformers_dist_log"),
        "--nnodes", env.get("NNODES", "1"),
        "--rank", env.get("RANK", "0"),
        "--run_mode=collective",
    ]
    if "MASTER_ADDR" in env or "MASTER_PORT" in env:
        command += ["--master", f"{env.get('MASTER_ADDR', '127.0.0.1')}:{env.get('MASTER_PORT', '8080')}"]
    if device == "cpu":
        env["PADDLE_DISTRI_BACKEND"] = "gloo"
        command += ["--nproc_per_node", str(nproc)]
    else:
        gpus = _visible_gpus()
        if nproc > len(gpus):
            raise ValueError(f"--nproc_per_node {nproc} asks for more GPUs than the {len(gpus)} visible ({gpus})")
        command += ["--gpus", ",".join(gpus[:nproc])]
    # the package's root on each rank's path, as paddleformers-cli puts its own
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    # A training script that is no .py file is run as a command: each rank runs `python -m paddle_llrd train`.
    return command + [sys.executable, "-m", "paddle_llrd", "train", *argv], env


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


def _raised_while_building_arguments(error: BaseException) -> bool:
    """Whether PaddleFormers raised ``error`` while it built the arguments from
    the config (a value its checks or paddle_llrd's refuse), before any model loads."""
    return any(frame.f_code is cli_parser.get_train_args.__code__ for frame, _ in traceback.walk_tb(error.__traceback__))


def _rank() -> int:
    return int(os.environ.get("PADDLE_TRAINER_ID", "0")) if _is_launched_rank() else 0


def _world_size(nproc: int) -> int:
    return int(os.environ["PADDLE_TRAINERS_NUM"]) if _is_launched_rank() else nproc


def _headline(config_path: str, config: Dict[str, Any], log: str, max_steps: int) -> str:
    """The console's first line: what runs, where it writes, where PaddleFormers' output goes."""
    what = f"{config['stage']}" + (f" ({config['fine_tuning']})" if config.get("fine_tuning") else "")
    return (f"paddle_llrd train {config_path}: {what} of {config.get('model_name_or_path')} on "
            f"{config.get('device', 'gpu')}, {max_steps} steps into {config.get('output_dir')}; "
            f"PaddleFormers' output in {log} (--verbose prints it here)")


def _train_from_the_command_line(config: Dict[str, Any], chosen: Dict[str, Tuple[Any, Any, str]],
                                 config_path: str, verbose: bool) -> int:
    """One process's run of :func:`main`: the console shows the settings, the
    progress and the outputs; PaddleFormers' own output goes to the log file
    (and to the console too with ``verbose``)."""
    rank = _rank()
    console = Console() if rank == 0 else Console(open(os.devnull, "w"))
    log = log_path(str(config["output_dir"]), rank)
    console.line(_headline(config_path, config, log, int(config.get("max_steps", _paddleformers_default("max_steps")))))
    quiet = contextlib.nullcontext() if verbose else output_to_log(log, console, preamble=IMPORT_OUTPUT.text)
    try:
        with quiet:
            seen = _run_checked(config, chosen, console)
    except (ValueError, TypeError) as exc:
        if not _raised_while_building_arguments(exc):
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


def main(argv: Optional[List[str]] = None) -> int:
    """The ``train`` command: ``python -m paddle_llrd train CONFIG [key=value ...]``.

    A mistake in the command or the config (a missing file, model folder or
    dataset, a misspelt key, a bad value, a ``--key value`` meant as an
    override, DPO in one process, a run that would overwrite a finished
    model) is one line on stderr and exit status 2, before any model loads.
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
    on_cuda = cuda_available()
    try:
        config = check_config(read_config(options.config, options.overrides), train_arguments_classes())
        check_device_keys(config, on_cuda)
    except (OSError, ValueError, TypeError) as exc:
        return _refuse(exc)
    chosen = choose_unset_keys(config, on_cuda)
    config.update({key: value for key, (_, value, _) in chosen.items()})
    device = _device_type(config, on_cuda)
    nproc = options.nproc_per_node
    if nproc is None:
        nproc = max(1, len(_visible_gpus())) if device == "gpu" else 1
    try:
        check_world_size(config, _world_size(nproc))
    except ValueError as exc:
        return _refuse(exc)
    done = finished_step(config)
    if done is not None:
        # Also when other settings changed (an override such as layerwise_decay=0.9): say how to use them.
        print(f"output_dir {str(config['output_dir'])!r} already holds a run finished at step {done}; nothing to "
              "do. To train again (with other settings too), write to a new output_dir (output_dir=PATH) or start "
              "over here (overwrite_output_dir=true)", flush=True)
        return 0
    try:
        check_nothing_is_overwritten(config)
    except ValueError as exc:
        return _refuse(exc)
    if nproc > 1 and not _is_launched_rank():
        rank_argv = [options.config, *options.overrides] + (["--verbose"] if options.verbose else [])
        command, env = _launch_command(nproc, device, rank_argv)
        log_dir = command[command.index("--log_dir") + 1]
        print(f"[paddle_llrd] launching {nproc} ranks: {shlex.join(command)}", file=sys.stderr, flush=True)
        status = relay_launch(command, env, log_dir, options.verbose)
        launch_log, rank_logs = os.path.join(log_dir, LAUNCH_LOG_NAME), os.path.join(log_dir, "workerlog.N")
        if status:
            print(f"{PROG}: the launch failed (exit status {status}); the launcher's output is in {launch_log}, "
                  f"each rank's in {rank_logs}", file=sys.stderr, flush=True)
        else:
            print(f"the launcher's output is in {launch_log}, each rank's in {rank_logs}", flush=True)
        return status
    return _train_from_the_command_line(config, chosen, options.config, options.verbose)
