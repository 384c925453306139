"""One parameter's optimizer state as the kernels take it: :class:`ParamState`.

A state is read from the optimizer's accumulators (Paddle's own) whenever an
update needs it, never kept between steps. Under ``multi_precision`` a
parameter cast since its accumulators were made is fitted to its new dtype
before the step by :func:`refit_accumulators` (or refused, naming it, by
:func:`cast_refusal`). Beta powers start at :func:`initial_beta_pow`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import paddle
from paddle.base import framework

from ..checks import optimizer_name
from .kernels import is_tensor

__all__ = ["UNSET_BETA_POW", "ParamState", "cast_refusal", "initial_beta_pow", "missing_accumulator", "on_cpu",
           "refit_accumulators", "rename_accumulators"]

# The initial beta power of a program whose beta is a Tensor: its value is
# known only when the program runs, so the first update sets the power to it
# (kernels.start_beta_pows). A power is in (0, 1] otherwise.
UNSET_BETA_POW = -1.0


class ParamState(NamedTuple):
    """One parameter's state tensors and the kernel's settings for it.

    ``moments`` are ``(moment1, moment2, moment2_max or None, beta1_pow,
    beta2_pow)``; ``master_weight`` the float32 copy of a float16/bfloat16
    parameter under ``multi_precision`` (else None); ``fp32_fallback`` whether
    the float32 kernel updates the master weight and casts it into the
    parameter (no half-precision ``adamw`` kernel on CPU).
    """

    moments: tuple[Any, ...]
    master_weight: Any
    fp32_fallback: bool

    def decay_target(self, param: Any) -> Any:
        """What the decay multiplies: the float32 master weight, else the parameter."""
        return param if self.master_weight is None else self.master_weight


def missing_accumulator(accumulators: Mapping[str, Mapping[str, Any]], kinds: Sequence[str | None],
                        names: Sequence[str], keys: Sequence[str], key: str) -> RuntimeError:
    """The error for a step whose parameter keyed ``key`` (its name in ``names``, or its master
    weight's in ``keys``) lacks one of the accumulators ``kinds`` (those of
    :attr:`ParamState.moments`, None for no maximum moment), raised before any update where
    ``paddle.optimizer.AdamW`` raises too: AMSGrad turned on after the moments were made.

    Examples:
        >>> missing_accumulator({"m1": {"w": 0}, "max": {}}, ["m1", None, "max"], ["w"], ["w"], "w")
        RuntimeError("AdamWDL: parameter 'w' has no max accumulator (amsgrad was turned on after its moments were made: pass amsgrad=True when building the optimizer); paddle.optimizer.AdamW raises too")
    """
    kind = next(kind for kind in kinds if kind is not None and key not in accumulators[kind])
    why = ("amsgrad was turned on after its moments were made: pass amsgrad=True when building the optimizer"
           if kind == kinds[2] else "its state was removed from the optimizer")
    name = names[list(keys).index(key)]
    return RuntimeError(f"{optimizer_name()}: parameter {name!r} has no {kind} accumulator ({why}); "
                        "paddle.optimizer.AdamW raises too")


def cast_refusal(param: Any, moment_dtype: Any, *, state_dtype: Any, wants_master: bool, has_master: bool) -> str | None:
    """Why the accumulators of ``param`` (moments of ``moment_dtype``), made before it was cast,
    cannot serve it, or None.

    ``state_dtype`` is the dtype its moments must have now (float32 for a
    float16/bfloat16 parameter); ``wants_master``/``has_master``: whether it
    needs a float32 master weight now and whether one exists.
    """
    if moment_dtype == state_dtype and not (has_master and not wants_master):
        return None
    held = f"{moment_dtype} moments" + (" and a float32 master weight" if has_master else "")
    was = "float16 or bfloat16" if has_master else moment_dtype  # (what the state was made for)
    return (
        f"{optimizer_name()}: parameter {param.name!r} was cast from {was} to {param.dtype} after the optimizer "
        f"created its state ({held}), which cannot serve a {param.dtype} parameter; cast the model before "
        "building the optimizer."
    )


def refit_accumulators(params: list[Any], *, moments_of: Callable[[Any], Any], is_half: Callable[[Any], bool],
                       uses_master: Callable[[Any], bool], master_weights: Mapping[str, Any],
                       create_master: Callable[[Any], Any], accumulators: dict[str, dict[str, Any]]) -> None:
    """Fit the accumulators of ``params`` that were cast since they were made (``multi_precision``).

    ``moments_of(param)`` is its first moment accumulator, or None before its first
    update. A parameter cast to float16/bfloat16 that ``uses_master`` gets its float32
    master weight (``create_master``, from its value now) and keeps its float32 moments,
    under the names an optimizer built for the cast model gives them
    (:func:`rename_accumulators`), so that checkpoints load either way. A cast the
    accumulators cannot serve is refused (``RuntimeError``, :func:`cast_refusal`) before
    anything changes; a move keeps the state as it is (as ``paddle.optimizer.AdamW`` does).
    """
    fitted = []
    for param in params:
        moment = moments_of(param)
        if moment is None:
            continue
        wants, has = uses_master(param), param.name in master_weights
        state_dtype = paddle.float32 if is_half(param.dtype) else param.dtype
        if moment.dtype == state_dtype and wants == has:
            continue
        refusal = cast_refusal(param, moment.dtype, state_dtype=state_dtype, wants_master=wants, has_master=has)
        if refusal is not None:
            raise RuntimeError(refusal)
        fitted.append(param)
    for param in fitted:
        rename_accumulators(accumulators, param.name, create_master(param).name)


def rename_accumulators(accumulators: dict[str, dict[str, Any]], old: str, new: str) -> None:
    """Key ``old``'s accumulators by ``new`` (a master weight's name), and name them so.

    Paddle keys and names the accumulators of a float16/bfloat16 parameter
    under ``multi_precision`` after its master weight
    (``<param>_fp32_master_0_moment1_0``), and a checkpoint by those names.
    """
    for per_param in accumulators.values():
        accumulator = per_param.pop(old, None)
        if accumulator is None:
            continue
        if accumulator.name.startswith(old):
            accumulator.name = new + accumulator.name[len(old):]
        per_param[new] = accumulator


def initial_beta_pow(beta: Any) -> Any:
    """The value a beta power accumulator starts at: ``beta`` itself, a dygraph
    Tensor's value, or in a program :data:`UNSET_BETA_POW` for a Tensor.

    Examples:
        >>> initial_beta_pow(0.9)
        0.9
    """
    if not is_tensor(beta):
        return beta
    return float(beta.item()) if framework.in_dygraph_mode() else UNSET_BETA_POW


def on_cpu(param: Any) -> bool:
    """Whether ``param`` is updated on CPU, where Paddle has no half-precision ``adamw`` kernel
    (its float32 master weight takes the step: :attr:`ParamState.fp32_fallback`)."""
    if framework.in_dygraph_mode():
        return param.place.is_cpu_place()
    return paddle.device.get_device() == "cpu"
