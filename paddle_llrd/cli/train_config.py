"""The config of ``python -m paddle_llrd train``: how it is read, what it
trains with, and the defaults the command chooses; the part of the command
that needs PaddleFormers (imported here, its import notices kept for the
run's log in :data:`IMPORT_OUTPUT`).

:func:`read_config` reads the YAML or JSON file and its ``key=value``
overrides; :class:`LLRDFinetuningArguments` is the CLI's
``FinetuningArguments`` with paddle_llrd's fields
(:func:`train_arguments_classes` puts it in PaddleFormers' parser);
:func:`choose_unset_keys` and :func:`check_device_keys` make a config train
on the machine at hand (a CPU without a ``device`` key), and
:func:`changed_defaults` lists the defaults that differ from
``paddleformers-cli``'s, which :func:`announce_changed_defaults` prints as
one warning at start.

Examples:
    >>> choose_unset_keys({"output_dir": "out"}, on_cuda=False)["device"]
    ('gpu', 'cpu', 'this Paddle sees no CUDA device')
    >>> changed_defaults({"compute_type": "bf16"})
    {'save_checkpoint_format': ('flex_checkpoint', 'unified_checkpoint'), 'load_checkpoint_format': ('flex_checkpoint', 'unified_checkpoint')}
    >>> sorted(changed_defaults({"compute_type": "float32", "amp_master_grad": False}))
    ['load_checkpoint_format', 'save_checkpoint_format', 'sharding']
"""
from __future__ import annotations

import json
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Tuple

from paddle_llrd.cli.train_console import captured_output
from paddle_llrd.cli.train_env import train_environment_error
from paddle_llrd.warning_classes import TrainerSettingWarning

# PaddleFormers prints notices while it imports ("PyTorch was not found", ...): the
# run's log gets them (IMPORT_OUTPUT.text), the console does not.
with captured_output() as IMPORT_OUTPUT:
    try:
        from paddleformers.cli.hparams import parser as cli_parser
        from paddleformers.cli.hparams.finetuning_args import FinetuningArguments
        import yaml
        from omegaconf import OmegaConf
        from omegaconf.errors import OmegaConfBaseException

        from paddle_llrd.integrations.paddleformers import LLRDTrainingArguments
    except ImportError as exc:  # PaddleFormers or its CLI extras (omegaconf, ...) absent, or the pins wrong
        raise train_environment_error("train", exc) from exc

from paddle_llrd.cli.train_checks import field_defaults  # noqa: E402  (imports PaddleFormers too)

__all__ = [
    "IMPORT_OUTPUT",
    "LLRDFinetuningArguments",
    "announce_changed_defaults",
    "changed_defaults",
    "check_device_keys",
    "choose_unset_keys",
    "cuda_available",
    "device_type",
    "paddleformers_default",
    "raised_while_building_arguments",
    "read_config",
    "train_arguments_classes",
]

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
            self.sharding = paddleformers_default("sharding") if amp else ""
        super().__post_init__()


def paddleformers_default(name: str) -> Any:
    """The default ``paddleformers-cli`` gives ``name`` (a field of one of its arguments classes)."""
    return field_defaults(cli_parser._TRAIN_ARGS)[name]


def cuda_available() -> bool:
    """Whether this Paddle build can train on a CUDA device here."""
    import paddle

    return paddle.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0


def device_type(config: Dict[str, Any], on_cuda: bool) -> str:
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
    on_cpu = device_type(config, on_cuda) == "cpu"
    wanted = [
        ("do_train", True, True, "the train command trains; paddleformers-cli's false only prints the arguments"),
        ("device", "cpu", not on_cuda, "this Paddle sees no CUDA device"),
        ("_attn_implementation", "eager", on_cpu, "flashmask attention needs a GPU"),
        ("compute_type", "float32", on_cpu, "bf16 and fp16 AMP need a GPU"),
    ]
    return {
        key: (paddleformers_default(key), value, reason)
        for key, value, applies, reason in wanted
        if applies and key not in config
    }


def check_device_keys(config: Dict[str, Any], on_cuda: bool) -> None:
    """Refuse, naming the key to set, what cannot train on this machine.

    Raises:
        ValueError: ``device: gpu`` where no CUDA device is seen, or
            ``_attn_implementation: flashmask`` with ``device: cpu``.
    """
    device = device_type(config, on_cuda)
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
    amp = _uses_amp(config.get("compute_type", paddleformers_default("compute_type")))
    here = {
        "save_checkpoint_format": LLRDTrainingArguments.__dataclass_fields__["save_checkpoint_format"].default,
        "load_checkpoint_format": LLRDTrainingArguments.__dataclass_fields__["load_checkpoint_format"].default,
        "amp_master_grad": amp,
        "sharding": paddleformers_default("sharding") if amp else "",
    }
    return {
        name: (paddleformers_default(name), value)
        for name, value in here.items()
        if name not in config and value != paddleformers_default(name)
    }


_REASONS = {
    "save_checkpoint_format": "PaddleFormers' flex_checkpoint does not resume in one process",
    "load_checkpoint_format": "PaddleFormers' flex_checkpoint does not resume in one process",
    "amp_master_grad": "compute_type float32 has no AMP, where PaddleFormers refuses amp_master_grad: true",
    "sharding": "without AMP PaddleFormers' stage1 cannot start on several ranks",
}


def announce_changed_defaults(config: Dict[str, Any], chosen: Dict[str, Tuple[Any, Any, str]]) -> None:
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


def raised_while_building_arguments(error: BaseException) -> bool:
    """Whether PaddleFormers raised ``error`` while it built the arguments from
    the config (a value its checks or paddle_llrd's refuse), before any model loads."""
    return any(frame.f_code is cli_parser.get_train_args.__code__ for frame, _ in traceback.walk_tb(error.__traceback__))
