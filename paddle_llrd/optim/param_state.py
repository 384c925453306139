"""One parameter's optimizer state as the kernels take it: :class:`ParamState`.

The optimizer makes a state from its accumulators when a parameter is first
updated and, in dygraph, keeps it across steps while the parameter keeps the
dtype it was made for (:meth:`ParamState.fits`); a cast under
``multi_precision`` is refused or fitted by :func:`refit_states` (with
:func:`cast_refusal` and :func:`rename_accumulators`). Beta powers start at
:func:`initial_beta_pow`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import paddle
from paddle.base import framework

from .kernels import is_tensor

__all__ = ["UNSET_BETA_POW", "ParamState", "cast_refusal", "initial_beta_pow", "refit_states", "rename_accumulators"]

# The initial beta power of a program whose beta is a Tensor: its value is
# known only when the program runs, so the first update sets the power to it
# (kernels.start_beta_pows). A power is in (0, 1] otherwise.
UNSET_BETA_POW = -1.0


class ParamState:
    """One parameter's state tensors and the kernel's settings for it.

    ``decays`` is whether the parameter decays, or None where
    ``apply_decay_param_fun`` is asked at every update (a function that does
    not declare ``pure_in_name = True``); ``moments`` are ``(moment1,
    moment2, moment2_max or None, beta1_pow, beta2_pow)``; ``master_weight``
    the float32 copy of a float16/bfloat16 parameter under
    ``multi_precision`` (else None); ``fp32_fallback`` whether the float32
    kernel updates the master weight and casts it into the parameter (no
    half-precision ``adamw`` kernel on CPU).
    """

    __slots__ = ("decays", "moments", "master_weight", "fp32_fallback", "dtype", "place")

    def __init__(self, decays: bool | None, moments: tuple[Any, ...], master_weight: Any, fp32_fallback: bool,
                 dtype: Any = None, place: Any = None) -> None:
        self.decays = decays
        self.moments = moments
        self.master_weight = master_weight
        self.fp32_fallback = fp32_fallback
        self.dtype = dtype
        self.place = place

    def fits(self, param: Any) -> bool:
        """Whether ``param`` still has the dtype (and, with a master weight, the place) the state was made for.

        A cast or, for a master weight, a move (which decides the CPU
        fallback) needs another state. Otherwise a move keeps the state where
        it is, as ``paddle.optimizer.AdamW`` does.
        """
        dtype = param.dtype
        if dtype is not self.dtype and dtype != self.dtype:  # `is`: Paddle's dtypes are singletons, == is slow
            return False
        return self.master_weight is None or param.place._equals(self.place)

    def decay_target(self, param: Any) -> Any:
        """What the decay multiplies: the float32 master weight, else the parameter."""
        return param if self.master_weight is None else self.master_weight


def cast_refusal(param: Any, stale: ParamState, *, state_dtype: Any, wants_master: bool, has_master: bool) -> str | None:
    """Why the state ``stale`` of ``param``, cast since it was made, cannot serve it, or None.

    ``state_dtype`` is the dtype its moments must have now (float32 for a
    float16/bfloat16 parameter); ``wants_master``/``has_master``: whether it
    needs a float32 master weight now and whether one exists.
    """
    moment_dtype = stale.moments[0].dtype
    if moment_dtype == state_dtype and not (has_master and not wants_master):
        return None
    held = f"{moment_dtype} moments" + (" and a float32 master weight" if has_master else "")
    return (
        f"AdamWDL: parameter {param.name!r} was cast from {stale.dtype} to {param.dtype} after the "
        f"optimizer created its state ({held}), which cannot serve a {param.dtype} parameter; "
        "cast the model before building the optimizer."
    )


def refit_states(states: dict[str, ParamState], params: list[Any], *, is_half: Callable[[Any], bool],
                 uses_master: Callable[[Any], bool], master_weights: Mapping[str, Any],
                 create_master: Callable[[Any], Any], accumulators: dict[str, dict[str, Any]]) -> None:
    """Drop from ``states`` (by parameter name) those of ``params`` cast to another dtype
    since they were made, fitting the optimizer's state to the new dtype; refuse, naming
    the parameter and before anything changes, a cast the state cannot serve
    (``RuntimeError``, :func:`cast_refusal`).

    A parameter cast to float16/bfloat16 (``is_half``) that ``uses_master`` gets its
    float32 master weight (``create_master``, from its value now) and keeps its float32
    moments, under the names an optimizer built for the cast model gives them
    (:func:`rename_accumulators`), so that checkpoints load either way; a move keeps the
    state as it is (as ``paddle.optimizer.AdamW`` does).
    """
    stale = [(param, states[param.name]) for param in params
             if param.name in states and not states[param.name].fits(param)]
    for param, state in stale:
        refusal = cast_refusal(param, state, state_dtype=paddle.float32 if is_half(param.dtype) else param.dtype,
                               wants_master=uses_master(param), has_master=param.name in master_weights)
        if refusal is not None:
            raise RuntimeError(refusal)
    for param, _ in stale:
        if uses_master(param) and param.name not in master_weights:
            rename_accumulators(accumulators, param.name, create_master(param).name)
        del states[param.name]


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
