"""Which parameter a loaded optimizer state belongs to, and when loading it by name would be wrong.

Paddle keys an optimizer's state by the parameter's *Paddle* name
(``linear_3.w_0_moment1_0``, ``master_weights['linear_3.w_0']``), which counts
the layers a process has built: one more layer (or a loss module) built
before the model in the resume script, and every name moves. The model's own
``set_state_dict`` matches by structured name and does not notice;
``paddle.optimizer.AdamW`` then asserts (``Optimizer set error, ... should in
state dict``), or, when the extra layer is trained too, gives each layer the
moments of the one before. AdamWDL starts the state of a parameter that has
none in the checkpoint afresh (it was frozen when the checkpoint was saved;
Paddle asserts there), which alone would restart a renamed parameter at zero
without a word.

So AdamWDL's ``state_dict()`` records the structured name of each of its
parameters (from ``name_dict``; None where it has none) under
:data:`STRUCTURED_NAMES_KEY`, an entry ``paddle.optimizer.AdamW`` ignores
(:func:`with_extra_entries`, which also adds a weight-decay schedule's
position), and :func:`matched_state_dict` matches a checkpoint to the parameters before
anything is loaded:

* by structured name where the checkpoint and the optimizer both know it
  (the entries renamed to the parameters' Paddle names now), by Paddle name
  otherwise (checkpoints without the record, parameters without a
  structured name);
* entries that no parameter consumes, while a parameter is left without
  state: ``ValueError`` naming both (loading would restart those parameters,
  or give them another parameter's state); with every parameter served, a
  :class:`~paddle_llrd.CheckpointMatchWarning` naming the unused entries (a
  checkpoint of more parameters than this optimizer trains);
* a trainable parameter the checkpoint's record does not list (neither with
  state nor frozen when saved): a :class:`~paddle_llrd.CheckpointMatchWarning`
  naming it; it starts afresh. A parameter the record lists without state
  was frozen when saved and starts afresh silently, as in the uninterrupted run
  (in an optimizer that holds no state for it yet: one that does, rolled back
  in the same process, is refused with a ``ValueError`` naming it);
* a trainable parameter without state in a checkpoint without the record
  (``paddle.optimizer.AdamW``'s, PaddleNLP's, an older AdamWDL's): a
  :class:`~paddle_llrd.CheckpointMatchWarning` naming it. Nothing tells a
  parameter frozen when saved from one whose Paddle name moved (a layer
  built before the model, and trained too, takes the first name, every
  layer the state of the one before it, and the last is left without):
  ``paddle.optimizer.AdamW`` loads such a checkpoint silently; AdamWDL loads
  it and says so.
"""
from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from ..checks import optimizer_name
from ..warning_classes import CheckpointMatchWarning, stacklevel_outside_package

__all__ = ["EXTRA_STATE_KEYS", "MASTER_WEIGHTS_KEY", "STRUCTURED_NAMES_KEY", "WEIGHT_DECAY_SCHEDULE_KEY",
           "with_extra_entries", "has_saved_state", "matched_state_dict", "saved_parameter_names",
           "structured_names_record"]

# The entry of Paddle's state dict that maps parameter names to float32 master weights.
MASTER_WEIGHTS_KEY = "master_weights"
# The entry of AdamWDL's state dict that maps each parameter's Paddle name to its structured name (or None).
STRUCTURED_NAMES_KEY = "structured_names"
# The entry of AdamWDL's state_dict() that holds its weight-decay schedule's state.
WEIGHT_DECAY_SCHEDULE_KEY = "weight_decay_schedule"
# The entries of AdamWDL's state_dict() beyond paddle.optimizer.AdamW's, none of them a Tensor.
EXTRA_STATE_KEYS = (WEIGHT_DECAY_SCHEDULE_KEY, STRUCTURED_NAMES_KEY)
# Paddle names a float16/bfloat16 parameter's float32 master weight
# `<param name>_fp32_master_<n>`, and under multi_precision its moments after it.
_MASTER_WEIGHT_NAME = re.compile(r"^(?P<param>.+)_fp32_master_\d+$")
# How many names an error or warning shows (a checkpoint of a large model has thousands).
_SHOWN = 5


def _accumulator_pattern(optimizer: Any) -> re.Pattern[str]:
    """``<param name>_<accumulator>_<n>``, as Paddle's ``_add_accumulator`` names a state tensor."""
    accumulators = sorted(
        {
            getattr(optimizer, attribute)
            for attribute in (
                "_moment1_acc_str", "_moment2_acc_str", "_moment2_acc_max_str",
                "_beta1_pow_acc_str", "_beta2_pow_acc_str",
            )
            if isinstance(getattr(optimizer, attribute, None), str)
        },
        key=len,
        reverse=True,  # moment2_max before moment2
    )
    prefix = re.escape(optimizer._name) + "_" if getattr(optimizer, "_name", None) else ""
    return re.compile(rf"^(?P<param>.+)_{prefix}(?:{'|'.join(map(re.escape, accumulators))})_\d+$")


def saved_parameter_names(optimizer: Any, state_dict: Mapping[str, Any]) -> dict[str, list[str]]:
    """``{parameter name: its entries}`` of the parameter state in ``state_dict`` (accumulators
    and master weights); other entries (the lr schedule's, a weight-decay schedule's) are not parameter state.

    The moments of a float16/bfloat16 parameter under ``multi_precision`` are
    named after its master weight (``<param>_fp32_master_0_moment1_0``) and
    belong to the parameter.

    Examples:
        >>> import paddle
        >>> from paddle_llrd import AdamWDL
        >>> linear = paddle.nn.Linear(2, 2)
        >>> opt = AdamWDL(parameters=linear.parameters())
        >>> saved = {f"{linear.weight.name}_moment1_0": None, "LR_Scheduler": {},
        ...          f"{linear.bias.name}_fp32_master_0_moment2_0": None}
        >>> names = list(saved_parameter_names(opt, saved))
        >>> names == [linear.weight.name, linear.bias.name]
        True
    """
    pattern = _accumulator_pattern(optimizer)
    names: dict[str, list[str]] = {}
    for key in state_dict:
        if not isinstance(key, str):
            continue
        if key == MASTER_WEIGHTS_KEY and isinstance(state_dict[key], Mapping):
            for param_name in state_dict[key]:
                names.setdefault(str(param_name), []).append(f"{MASTER_WEIGHTS_KEY}[{param_name!r}]")
            continue
        match = pattern.match(key)
        if match:
            owner = match.group("param")
            master = _MASTER_WEIGHT_NAME.match(owner)
            names.setdefault(master.group("param") if master else owner, []).append(key)
    return names


def _shown(names: list[str]) -> str:
    listed = ", ".join(repr(name) for name in names[:_SHOWN])
    return listed + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def structured_names_record(parameters: Iterable[Any], name_dict: Mapping[str, str] | None) -> dict[str, str | None]:
    """The :data:`STRUCTURED_NAMES_KEY` entry: ``{param.name: structured name or None}`` for each of ``parameters``.

    Examples:
        >>> import paddle
        >>> linear = paddle.nn.Linear(2, 2)
        >>> structured = {linear.weight.name: "weight"}
        >>> record = structured_names_record(linear.parameters(), structured)
        >>> list(record.values())
        ['weight', None]
    """
    names = name_dict or {}
    return {param.name: (str(names[param.name]) if param.name in names else None) for param in parameters}


def with_extra_entries(state: dict[str, Any], parameters: Iterable[Any], name_dict: Mapping[str, str] | None,
                       schedule: Any = None) -> dict[str, Any]:
    """``state``, a ``paddle.optimizer.AdamW.state_dict()``, with AdamWDL's entries added:
    :data:`STRUCTURED_NAMES_KEY` (:func:`structured_names_record`) where it holds parameter
    state (with none, the entry would make AdamW expect some, and assert), and a weight-decay
    ``schedule``'s position (:data:`WEIGHT_DECAY_SCHEDULE_KEY`)."""
    if any(key not in ("LR_Scheduler", WEIGHT_DECAY_SCHEDULE_KEY) for key in state):
        state[STRUCTURED_NAMES_KEY] = structured_names_record(parameters, name_dict)
    if schedule is not None:
        state[WEIGHT_DECAY_SCHEDULE_KEY] = schedule.state_dict()
    return state


def _checked_record(record: Any, owner: str) -> Mapping[str, str | None] | None:
    if record is None:
        return None
    if not isinstance(record, Mapping) or not all(
        isinstance(key, str) and (value is None or isinstance(value, str)) for key, value in record.items()
    ):
        raise ValueError(
            f"{owner}.set_state_dict: the checkpoint's {STRUCTURED_NAMES_KEY!r} entry must map Paddle parameter "
            f"names to structured names (str or None), got {type(record).__name__} {str(record)[:200]}."
        )
    return record


def _unique_inverse(names: Mapping[str, str | None]) -> dict[str, str]:
    """``{structured name: Paddle name}`` of the structured names that occur once (a name twice matches nothing)."""
    counts: dict[str, int] = {}
    for structured in names.values():
        if structured is not None:
            counts[structured] = counts.get(structured, 0) + 1
    return {structured: name for name, structured in names.items() if structured is not None and counts[structured] == 1}


def _owners(
    saved_names: Iterable[str], record: Mapping[str, str | None] | None, current: Mapping[str, str | None]
) -> tuple[dict[str, str | None], bool]:
    """``{saved Paddle name: the Paddle name of the parameter it belongs to now, or None}``, and
    whether structured names took part.

    By structured name where the record and ``current`` (the optimizer's
    ``{param.name: structured name or None}``) both have one, once each;
    otherwise by Paddle name, to a parameter without a structured name of
    its own (one with a structured name is served by that name only). When
    not one structured name matches (the names were built another way, e.g.
    from a wrapper of the model), every entry is matched by Paddle name.
    """
    saved_by_structure = _unique_inverse(record) if record else {}
    current_by_structure = _unique_inverse(current) if saved_by_structure else {}
    by_structure = {old: current_by_structure.get(structured) for structured, old in saved_by_structure.items()}
    if not any(by_structure.values()):
        by_structure, current_by_structure = {}, {}
    structured_now = set(current_by_structure.values())
    owners = {}
    for name in saved_names:
        if name in by_structure:
            owners[name] = by_structure[name]
        else:
            owners[name] = name if name in current and name not in structured_now else None
    return owners, bool(by_structure)


def _described(name: str, structured: str | None) -> str:
    return f"{name} ({structured})" if structured else name


def matched_state_dict(
    optimizer: Any,
    state_dict: Mapping[str, Any],
    parameters: Iterable[Any],
    *,
    name_dict: Mapping[str, str] | None = None,
    owner: str | None = None,
) -> dict[str, Any]:
    """``state_dict`` with each parameter's state under the parameter's Paddle name now, checked.

    ``parameters`` are the optimizer's, frozen ones included; ``name_dict``
    its ``{param.name: structured name}``. Entries are matched by structured
    name where ``state_dict``'s :data:`STRUCTURED_NAMES_KEY` record and
    ``name_dict`` both name the parameter, by Paddle name otherwise (see the
    module docstring). The result leaves out the record and the entries no
    parameter consumes; ``state_dict`` itself is not changed. ``owner``: the
    optimizer the messages name (None: :func:`~paddle_llrd.checks.optimizer_name`).

    Raises:
        ValueError: some entries match no parameter and some parameter has no
            state (names both), the record is not a mapping of names, or the
            optimizer holds state for a parameter ``state_dict`` has none of
            (saved while it was frozen: a rollback in the same process; names it).

    Warns:
        CheckpointMatchWarning: some entries match no parameter while every
            parameter has state (names the entries); a trainable parameter the
            record does not list, or without a record has no state, starts
            afresh (names it).

    Examples:
        >>> import paddle
        >>> from paddle_llrd import AdamWDL
        >>> linear = paddle.nn.Linear(2, 2)
        >>> names = {p.name: n for n, p in linear.named_parameters()}
        >>> opt = AdamWDL(parameters=linear.parameters(), name_dict=names)
        >>> saved = {"linear_99.w_0_moment1_0": paddle.ones([2, 2]),
        ...          STRUCTURED_NAMES_KEY: {"linear_99.w_0": "weight",
        ...                                 "linear_99.b_0": "bias"}}
        >>> matched = matched_state_dict(opt, saved, linear.parameters(), name_dict=names)
        >>> list(matched) == [f"{linear.weight.name}_moment1_0"]
        True
    """
    owner = optimizer_name() if owner is None else owner
    record = _checked_record(state_dict.get(STRUCTURED_NAMES_KEY), owner)
    state = {key: value for key, value in state_dict.items() if key != STRUCTURED_NAMES_KEY}
    saved = saved_parameter_names(optimizer, state)
    params = list(parameters)
    if not saved:  # no parameter state at all (a fresh optimizer's state dict, an lr schedule only)
        _check_no_state_left_behind(optimizer, params, state, owner)
        return state
    current = structured_names_record(params, name_dict)
    owners, by_structure = _owners(set(saved) | set(record or ()), record, current)
    unmatched = [entry for name, entries in saved.items() if owners[name] is None for entry in entries]
    served = {owners[name] for name in saved if owners[name] is not None}
    stateless = [param.name for param in params if param.name not in served]
    saved_structure = record or {}
    if unmatched and stateless:
        unmatched = [
            f"{entry} ({saved_structure[name]})" if saved_structure.get(name) else entry
            for name, entries in saved.items() if owners[name] is None for entry in entries
        ]
        raise ValueError(
            f"{owner}.set_state_dict: {len(unmatched)} checkpoint entries belong to no parameter of this optimizer "
            f"({_shown(unmatched)}) while {len(stateless)} of its parameters have no saved state "
            f"({_shown([_described(name, current[name]) for name in stateless])}): Paddle's parameter names have "
            "moved since the checkpoint was saved (a layer or loss module built before the model in one script and "
            "not the other, or layers built in another order), or the structured names differ. Loading by name "
            "would restart those parameters' moments and beta powers at zero, or give them another parameter's. "
            "Build the model in the resume script as in the script that saved the checkpoint, pass the same "
            "`name_dict` (structured names) to both optimizers, or rename the checkpoint's entries to the "
            "parameters' names before loading it."
        )
    if unmatched:
        warnings.warn(
            f"{owner}.set_state_dict: {len(unmatched)} checkpoint entries belong to no parameter of this "
            f"optimizer and are left unused: {_shown(unmatched)}. (Every parameter of the optimizer has "
            "its state in the checkpoint; the checkpoint holds more parameters than it trains.)",
            CheckpointMatchWarning,
            stacklevel=stacklevel_outside_package(),
        )
    if record is not None:
        listed = {owners[name] for name in record if owners.get(name) is not None}
        new = [param.name for param in params if not param.stop_gradient and param.name not in listed]
        if new:
            warnings.warn(
                f"{owner}.set_state_dict: {len(new)} trainable parameters are not among the "
                f"{len(record)} parameters the checkpoint was saved from "
                f"({_shown([_described(name, current[name]) for name in new])}): they start with fresh moments "
                "and beta powers."
                + ("" if by_structure else
                   " The others were matched by Paddle name; if a layer was built before the model in this script "
                   "and not in the saving one, Paddle's names moved and they resumed with other parameters' "
                   "state: pass `name_dict` (structured names) to the optimizer that saves and the one that loads."),
                CheckpointMatchWarning,
                stacklevel=stacklevel_outside_package(),
            )
    else:
        fresh = [param.name for param in params if not param.stop_gradient and param.name not in served]
        if fresh:
            warnings.warn(
                f"{owner}.set_state_dict: the checkpoint records no structured names (saved by "
                "paddle.optimizer.AdamW, PaddleNLP or an older AdamWDL), so its state was matched by Paddle's "
                f"parameter names, and {len(fresh)} trainable parameters have none "
                f"({_shown([_described(name, current[name]) for name in fresh])}): they start with fresh moments "
                "and beta powers. Right if they were frozen when the checkpoint was saved; if this script builds "
                "a layer before the model that the saving one did not, Paddle's names moved and the other "
                "parameters resumed with other layers' state. "
                "Build the model as the saving script did, or save with AdamWDL and `name_dict` to resume by "
                "structured name.",
                CheckpointMatchWarning,
                stacklevel=stacklevel_outside_package(),
            )
    matched = _renamed(state, saved, owners)
    _check_no_state_left_behind(optimizer, params, matched, owner)
    return matched


def _renamed(state: dict[str, Any], saved: Mapping[str, list[str]], owners: Mapping[str, str | None]) -> dict[str, Any]:
    """``state`` with each parameter's entries (``saved``, by saved Paddle name) under its owner's
    name; entries without an owner left out.

    A renamed master weight is a copy named after its new parameter, as
    Paddle names it (``<param>_fp32_master_<n>``): its moments are looked up
    by that name.
    """
    if all(owners[name] == name for name in saved):
        return state
    owner_of = {entry: name for name, entries in saved.items() for entry in entries}
    renamed: dict[str, Any] = {}
    for key, value in state.items():
        if key == MASTER_WEIGHTS_KEY and isinstance(value, Mapping):
            masters = {}
            for name, master in value.items():
                new = owners.get(name, name)
                if new is None:
                    continue
                if new != name:
                    master = master.clone()
                    master.name = new + master.name[len(name):] if master.name.startswith(name) else new + "_fp32_master_0"
                masters[new] = master
            renamed[key] = masters
            continue
        old = owner_of.get(key)
        if old is None:
            renamed[key] = value  # not parameter state: the lr schedule's, a weight-decay schedule's
            continue
        new = owners[old]
        if new is not None:
            renamed[new + key[len(old):]] = value
    return renamed


def _check_no_state_left_behind(optimizer: Any, parameters: Iterable[Any], state: Mapping[str, Any],
                                owner: str) -> None:
    """Refuse, before anything is loaded, a ``state`` (matched: keyed by the parameters' names now)
    that holds no state for some of ``parameters`` while the optimizer holds some for them.

    They were frozen, or not trained yet, when ``state`` was saved: a freshly built optimizer
    starts them afresh, as the run that saved it did, but Paddle's loading into this one asserts
    on the first state it lacks, with the others loaded (an in-process rollback, say).

    Raises:
        ValueError: names the parameters and what to do.
    """
    kinds = list(optimizer._accumulators.values())
    keys = {param.name: optimizer._accumulator_key(param) for param in parameters}
    behind = [name for name, key in keys.items()
              if any(key in kind for kind in kinds) and not has_saved_state(state, key)]
    if behind:
        raise ValueError(
            f"{owner}.set_state_dict: the checkpoint holds no state for "
            f"{len(behind)} parameters this optimizer has state for ({_shown(behind)}): they were frozen, or not "
            "trained yet, when it was saved. A freshly built optimizer starts them afresh, as the run that saved "
            "it did; this one cannot, holding their state from this run. Build the optimizer anew (as resuming "
            "in a new process does) and load the checkpoint into it."
        )


def has_saved_state(holder: Mapping[str, Any], param_name: str) -> bool:
    """Whether a loaded optimizer state holds accumulators of ``param_name``
    (Paddle names them ``<param name>_<accumulator>_<n>``)."""
    prefix = param_name + "_"
    return any(key.startswith(prefix) for key in holder)
