"""``python -m paddle_llrd train CONFIG.yaml [key=value ...]``: PaddleFormers'
own ``paddleformers-cli train`` workflows, trained by :class:`LLRDTrainer`.

The config is the CLI's YAML (or JSON) as it is, ``stage``, ``fine_tuning``,
``train_dataset_path`` and all, plus any of paddle_llrd's fields
(``layerwise_decay``, ``layer_map``, any registered ``lr_scheduler_type`` with
``lr_scheduler_kwargs``, ``weight_decay_end``/``weight_decay_incr_style``,
``ema_decay``/``ema_eval``); ``key=value`` pairs after the file override it,
as with ``paddleformers-cli``. The workflow that runs is PaddleFormers' own
for the ``stage`` (its data pipeline and collators, LoRA, checkpoint
detection and resume, saving), with two of its classes replaced for the
run: the arguments class by :class:`LLRDFinetuningArguments` (the CLI's
``FinetuningArguments`` plus paddle_llrd's fields) and the trainer by a
subclass of the CLI's own trainer with :class:`LLRDTrainer` mixed in
(:class:`LLRDSFTTrainer` for ``SFT``/``PT``, :class:`LLRDDPOTrainer` for
``DPO``).

Before anything loads, the config is checked
(:mod:`paddle_llrd.cli.train_checks`: keys, stage, paddle_llrd's
fields, model folder, dataset paths); the command line says a mistake in one
line on stderr with exit status 2.

``train`` trains what the config asks: a config without ``do_train`` trains,
and on a machine without CUDA a config that leaves ``device``,
``_attn_implementation`` and ``compute_type`` out runs on the CPU with eager
attention in float32 (see :func:`choose_unset_keys`); a key the config sets is
never changed, and one that cannot run here (``device: gpu`` without CUDA,
``_attn_implementation: flashmask`` on the CPU) is refused naming the key to
set. These choices and the defaults that differ from ``paddleformers-cli``'s
are printed as one warning at start, one line each with its reason (see
:func:`changed_defaults`). A config whose output already holds its final step
is left alone (see :func:`finished_step`).

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
import subprocess
import sys
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from paddle_llrd.integrations.paddleformers import PADDLEFORMERS_REQUIREMENT

try:
    import yaml
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException
    from paddleformers.cli.hparams import parser as cli_parser
    from paddleformers.cli.hparams.finetuning_args import FinetuningArguments
    from paddleformers.cli.train import tuner as cli_tuner
    from paddleformers.cli.train.dpo import workflow as dpo_workflow
    from paddleformers.cli.train.dpo.dpo_trainer import DPOTrainer
    from paddleformers.cli.train.sft import workflow as sft_workflow
    from paddleformers.cli.train.sft.sft_trainer import SFTTrainer
except ImportError as exc:  # paddleformers' CLI extras (omegaconf, ...) absent
    raise ImportError(
        f"the train command needs PaddleFormers 1.2.0 with its CLI; install it with: {PADDLEFORMERS_REQUIREMENT} "
        f"(or `pip install -r requirements-paddleformers.txt` from the paddle_llrd repository). "
        f"The import failed with: {exc}"
    ) from exc

from paddleformers.trainer.trainer_callback import TrainerState
from paddleformers.trainer.trainer_utils import get_last_checkpoint
from paddleformers.utils.env import TRAINER_STATE_NAME

from paddle_llrd.cli.argparse_types import integer_at_least
from paddle_llrd.integrations.training_arguments import LLRDArgumentsMixin
from paddle_llrd.cli.train_checks import LLRD_STAGES, check_config, field_defaults
from paddle_llrd.integrations.paddleformers import LLRDTrainer, LLRDTrainingArguments

__all__ = [
    "LLRD_STAGES",
    "LLRDDPOTrainer",
    "LLRDFinetuningArguments",
    "LLRDSFTTrainer",
    "changed_defaults",
    "check_device_keys",
    "choose_unset_keys",
    "cuda_available",
    "finished_step",
    "main",
    "read_config",
    "run_workflow",
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


class LLRDSFTTrainer(LLRDTrainer, SFTTrainer):
    """The CLI's ``SFTTrainer`` (its evaluation with generation, logging and
    PTQ hooks) training with :class:`paddle_llrd.AdamWDL` as
    :class:`LLRDTrainer` does."""


class LLRDDPOTrainer(LLRDTrainer, DPOTrainer):
    """The CLI's ``DPOTrainer`` (its reference model and preference losses)
    training with :class:`paddle_llrd.AdamWDL` as :class:`LLRDTrainer` does."""


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
    warnings.warn(message, UserWarning, stacklevel=3)


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


def _train_arguments_classes() -> List[type]:
    """The classes PaddleFormers' parser builds from the config, with this module's arguments class."""
    return [LLRDFinetuningArguments if cls is FinetuningArguments else cls for cls in cli_parser._TRAIN_ARGS]


@contextlib.contextmanager
def _llrd_classes() -> Iterator[None]:
    """PaddleFormers' workflows with this module's arguments and trainer classes;
    the CLI's own classes are back afterwards, whatever happens."""
    replaced = [
        (cli_parser, "_TRAIN_ARGS", _train_arguments_classes()),
        (sft_workflow, "SFTTrainer", LLRDSFTTrainer),
        (dpo_workflow, "DPOTrainer", LLRDDPOTrainer),
    ]
    saved = [(module, name, getattr(module, name)) for module, name, _ in replaced]
    try:
        for module, name, value in replaced:
            setattr(module, name, value)
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


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
    _run_checked(check_config(config, _train_arguments_classes()), chosen or {})


def _run_checked(config: Dict[str, Any], chosen: Dict[str, Tuple[Any, Any, str]]) -> None:
    """:func:`run_workflow` for a config that :func:`check_config` has returned."""
    _announce_changed_defaults(config, chosen)
    with _llrd_classes():
        cli_tuner.run_tuner(dict(config))


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
        usage=f"{PROG} [-h] [--nproc_per_node N] config [key=value ...]",
        description="Run PaddleFormers' CLI workflow for the config's stage (SFT, PT, DPO; full or LoRA)\n"
                    "with LLRDTrainer: the CLI's YAML plus layerwise_decay, layer_map, registry schedules,\n"
                    "weight-decay ramps and EMA.",
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
    return parser


def _refuse(error: BaseException) -> int:
    """A user's mistake as one line on stderr, argparse's way (exit status 2)."""
    message = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
    return 2


def _raised_while_building_arguments(error: BaseException) -> bool:
    """Whether PaddleFormers raised ``error`` while it built the arguments from
    the config (a value its checks or paddle_llrd's refuse), before any model loads."""
    return any(frame.f_code is cli_parser.get_train_args.__code__ for frame, _ in traceback.walk_tb(error.__traceback__))


def main(argv: Optional[List[str]] = None) -> int:
    """The ``train`` command: ``python -m paddle_llrd train CONFIG [key=value ...]``.

    A mistake in the command or the config (a missing file, model folder or
    dataset, a misspelt key, a bad value) is one line on stderr and exit
    status 2, before any model loads.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    options = parser.parse_intermixed_args(argv)
    if options.config is None:
        parser.error("the following arguments are required: config")
    on_cuda = cuda_available()
    try:
        config = check_config(read_config(options.config, options.overrides), _train_arguments_classes())
        check_device_keys(config, on_cuda)
    except (OSError, ValueError, TypeError) as exc:
        return _refuse(exc)
    chosen = choose_unset_keys(config, on_cuda)
    config.update({key: value for key, (_, value, _) in chosen.items()})
    done = finished_step(config)
    if done is not None:
        print(f"output_dir already holds the final checkpoint (step {done}); nothing to do", flush=True)
        return 0
    device = _device_type(config, on_cuda)
    nproc = options.nproc_per_node
    if nproc is None:
        nproc = max(1, len(_visible_gpus())) if device == "gpu" else 1
    if nproc > 1 and not _is_launched_rank():
        command, env = _launch_command(nproc, device, [options.config, *options.overrides])
        print(f"[paddle_llrd] launching {nproc} ranks: {shlex.join(command)}", file=sys.stderr, flush=True)
        return subprocess.call(command, env=env)
    try:
        _run_checked(config, chosen)
    except (ValueError, TypeError) as exc:
        if not _raised_while_building_arguments(exc):
            raise
        return _refuse(exc)
    return 0
