"""Layer-wise learning-rate decay ratios for BERT-style parameter names.

:func:`layerwise_lr_decay` is the default ``set_param_lr_fun`` of
:class:`paddle_llrd.AdamWDL`. It maps a parameter to the factor its learning
rate is multiplied by: the top of the network trains at the full rate and
every layer below it at ``decay_rate`` times the rate of the layer above
(XLNet/ELECTRA-style "layer-wise decay", https://arxiv.org/abs/1906.08237).
"""
from __future__ import annotations

import numbers
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from ..checks import checked_positive
from ..warning_classes import DecayAboveOneWarning, LayerMapWarning, stacklevel_outside_package
from .layer_maps import PipelineLayerMap

__all__ = [
    "checked_layerwise_decay", "decay_is_off", "layer_id_of", "layerwise_lr_decay", "reads_optimizer_n_layers",
    "warn_if_decay_above_one", "warn_if_no_encoder_layers", "warn_if_n_layers_exceeds_blocks",
    "warn_if_n_layers_exceeds_read_blocks", "deepest_block_read",
    "NAME_DICT_ADVICE",
]

NAME_DICT_ADVICE = (
    "build it from the model with "
    "`name_dict = {p.name: n for n, p in model.named_parameters()}`"
)

_LAYER_MARKER = "encoder.layers."
_EMBEDDING_MARKER = "embedding"


def _structured_name(name_dict: Mapping[str, str] | None, param: Any) -> str:
    if name_dict is None:
        raise TypeError(
            "layerwise_lr_decay: `name_dict` is None, so the layer of parameter "
            f"{param.name!r} cannot be found; {NAME_DICT_ADVICE}."
        )
    try:
        return name_dict[param.name]
    except KeyError:
        raise KeyError(
            f"layerwise_lr_decay: parameter {param.name!r} is not in `name_dict` "
            f"(which maps Paddle parameter names to structured names); "
            f"{NAME_DICT_ADVICE} and pass the parameters of that same model."
        ) from None


def _block_index_text(structured_name: str) -> str | None:
    """The text between ``encoder.layers.`` and the next dot, or ``None`` for a name outside the blocks."""
    if _LAYER_MARKER not in structured_name:
        return None
    return structured_name[structured_name.find(_LAYER_MARKER) + len(_LAYER_MARKER):].split(".", 1)[0]


def _layer_id(structured_name: str, n_layers: int, caller: str, param_name: str | None = None) -> int:
    """The layer id of the rule (0 embeddings, ``i + 1`` encoder layer ``i``, ``n_layers + 1`` the rest).

    ``caller`` and ``param_name`` only name the culprit in error messages.
    """
    index_text = _block_index_text(structured_name)
    if index_text is None:
        return 0 if _EMBEDDING_MARKER in structured_name else n_layers + 1
    context = caller if param_name is None else f"{caller} (parameter {param_name!r})"
    # isdecimal, not isdigit: int() refuses digits such as superscripts
    if not index_text.isdecimal():
        raise ValueError(
            f"{context}: cannot read a layer index after {_LAYER_MARKER!r} in "
            f"{structured_name!r}; expected a name such as 'bert.encoder.layers.3.linear1.weight'."
        )
    layer = int(index_text)
    if layer >= n_layers:
        raise ValueError(
            f"{context}: {structured_name!r} is in encoder layer {layer}, but "
            f"n_layers={n_layers}; pass n_layers equal to the model's number of encoder "
            f"layers (layer indices run from 0 to n_layers - 1)."
        )
    return layer + 1


def decay_is_off(layerwise_decay: Any) -> bool:
    """Whether ``layerwise_decay`` leaves every ratio at 1: a real number equal to 1.0, nothing else.

    A Tensor decay counts as on whatever its value now: it is read at every
    step and may be changed in place (a decay that starts at 1.0 and falls),
    so its ratios need ``name_dict`` and its warnings are given from the
    start. The one answer of :func:`layerwise_lr_decay` (which needs no
    ``name_dict`` only when the decay is off), of
    :class:`~paddle_llrd.AdamWDL`'s checks and of the warnings below.

    Examples:
        >>> import paddle
        >>> decay_is_off(1.0), decay_is_off(0.8), decay_is_off(paddle.to_tensor(1.0))
        (True, False, False)
    """
    return isinstance(layerwise_decay, numbers.Real) and not isinstance(layerwise_decay, bool) and (
        float(layerwise_decay) == 1.0)


#: Why a layer-wise decay of exactly 1.0 is the way to switch it off, and how to freeze layers instead.
_DECAY_ADVICE = (
    "usually in (0, 1]; 1.0 turns layer-wise decay off; to freeze layers set their parameters' stop_gradient=True"
)


def checked_layerwise_decay(value: Any, argument: str = "layerwise_decay", *, owner: str | None = None) -> float:
    """A layer-wise lr decay as a float, finite and > 0.

    The one rule of :class:`~paddle_llrd.AdamWDL`'s ``layerwise_decay``,
    :func:`~paddle_llrd.layer_decay_param_groups`' ``layer_decay``, the
    Trainer's keyword and the Trainer/CLI field ``layerwise_decay``. A decay
    above 1 is accepted (:func:`warn_if_decay_above_one`, given where the
    ratios are made).

    Raises:
        TypeError: ``value`` is not a real number (a bool is refused).
        ValueError: ``value`` is NaN, infinite or ``<= 0``.

    Examples:
        >>> checked_layerwise_decay(0.8)
        0.8
        >>> checked_layerwise_decay(0.0, owner="AdamWDL")
        Traceback (most recent call last):
        ...
        ValueError: AdamWDL: `layerwise_decay` must be a finite number > 0, got 0.0 (usually in (0, 1]; ...).
    """
    return checked_positive(value, argument, owner=owner, advice=_DECAY_ADVICE)


def warn_if_decay_above_one(decay: float, argument: str = "layerwise_decay", *, owner: str | None = None) -> None:
    """A :class:`~paddle_llrd.DecayAboveOneWarning` naming ``decay`` when it is above 1.

    A decay ``d > 1`` gives numbers (a ratio is ``d ** k``) but inverts
    layer-wise decay: block ``i`` of ``L`` trains ``d ** (L - i)`` times
    faster than the head. Given by whatever makes the ratios
    (:class:`~paddle_llrd.AdamWDL`, :func:`~paddle_llrd.layer_decay_param_groups`),
    so that one value warns once however many checks it passes on its way.

    Examples:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     warn_if_decay_above_one(1.5, owner="AdamWDL")
        >>> print(caught[0].message)  # doctest: +ELLIPSIS
        AdamWDL: `layerwise_decay`=1.5 is greater than 1, so lower layers train faster than the head ...
    """
    if decay > 1.0:
        prefix = f"{owner}: " if owner else ""
        warnings.warn(
            f"{prefix}`{argument}`={decay!r} is greater than 1, so lower layers train faster than the head "
            f"(each block trains {decay!r} times as fast as the block above it, the embeddings fastest). "
            "Layer-wise decay takes a value in (0, 1), e.g. 0.8; accepted as given.",
            DecayAboveOneWarning,
            stacklevel=stacklevel_outside_package(),
        )


def layerwise_lr_decay(
    decay_rate: float, name_dict: Mapping[str, str] | None, n_layers: int, param: Any
) -> float:
    r"""Learning-rate ratio of ``param`` under layer-wise decay.

    With ``s = name_dict[param.name]`` (the structured name, e.g.
    ``bert.encoder.layers.3.linear1.weight``) and ``L = n_layers``:

    .. math::

        r =
        \begin{cases}
            d^{\,L - i} & \text{if } s \text{ contains } \texttt{encoder.layers.}i\texttt{.}\\
            d^{\,L + 1} & \text{else if } s \text{ contains } \texttt{embedding}\\
            1 & \text{otherwise (pooler, classifier heads)}
        \end{cases}

    with :math:`d` = ``decay_rate``,
    so the top encoder layer ``L-1`` gets ``decay_rate`` and the embeddings,
    below layer 0, get the smallest ratio.

    Args:
        decay_rate (float|Tensor): The factor between adjacent layers, usually in ``(0, 1]``.
        name_dict (dict): Maps each parameter's Paddle name (``param.name``, e.g.
            ``linear_3.w_0``) to its structured name; build it with
            ``{p.name: n for n, p in model.named_parameters()}``. It may be
            ``None`` only when the decay is off (:func:`decay_is_off`: a real
            1.0, not a Tensor), every ratio then being 1.
        n_layers (int): The number of encoder layers ``L``; layer indices must be
            below it.
        param (Tensor): The parameter.

    Returns:
        float: The ratio (a Tensor if ``decay_rate`` is one).

    Raises:
        KeyError: ``param.name`` is missing from ``name_dict``; the message names
            the parameter and says how to build ``name_dict``.
        TypeError: ``name_dict`` is ``None`` while the decay is on.
        ValueError: the layer index cannot be read, or is not below ``n_layers``.

    Examples:
        >>> import paddle
        >>> from paddle_llrd import layerwise_lr_decay
        >>> from paddle_llrd.models import tiny_bert
        >>> config = tiny_bert.TinyBertConfig(num_hidden_layers=2)
        >>> model = tiny_bert.TinyBertForSequenceClassification(config)
        >>> name_dict = {p.name: n for n, p in model.named_parameters()}
        >>> params = dict(model.named_parameters())
        >>> def ratio(name):
        ...     return layerwise_lr_decay(0.5, name_dict, 2, params[name])
        >>> ratio("bert.encoder.layers.1.linear1.weight")
        0.5
        >>> ratio("bert.encoder.layers.0.linear1.weight")
        0.25
        >>> ratio("bert.embeddings.word_embeddings.weight")
        0.125
        >>> layerwise_lr_decay(0.5, name_dict, 2, params["classifier.weight"])
        1.0
    """
    if name_dict is None and decay_is_off(decay_rate):
        # Every branch below is 1.0 ** k == 1.0, so no name is needed.
        return 1.0
    structured_name = _structured_name(name_dict, param)
    layer_id = _layer_id(structured_name, n_layers, "layerwise_lr_decay", param.name)
    if layer_id == n_layers + 1:
        return 1.0  # a float even for a Tensor decay_rate
    return decay_rate ** (n_layers + 1 - layer_id)


def layer_id_of(structured_name: str, n_layers: int) -> int:
    r"""The layer id :func:`layerwise_lr_decay` gives ``structured_name``, on :class:`~paddle_llrd.layer_decay.layer_maps.LayerMap`'s scale.

    .. math::

        k =
        \begin{cases}
            i + 1 & \text{if the name contains } \texttt{encoder.layers.}i\texttt{.}\\
            0 & \text{else if it contains } \texttt{embedding}\\
            L + 1 & \text{otherwise}
        \end{cases}

    with :math:`L` = ``n_layers``, so that :func:`layerwise_lr_decay`'s ratio
    is :math:`d^{\,L + 1 - k}` (the rule of :class:`~paddle_llrd.layer_decay.layer_maps.LayerMap`).

    Raises:
        ValueError: the layer index cannot be read, or is not below ``n_layers``.

    Examples:
        >>> from paddle_llrd.layer_decay.layerwise import layer_id_of
        >>> [layer_id_of(n, 2) for n in ("bert.embeddings.word_embeddings.weight",
        ...  "bert.encoder.layers.0.linear1.weight", "bert.encoder.layers.1.norm2.bias",
        ...  "classifier.weight")]
        [0, 1, 2, 3]
    """
    return _layer_id(structured_name, n_layers, "layer_id_of")


# How many structured names the warning below quotes.
_NAMES_QUOTED = 4


def _parameter_names(parameters: Any, name_dict: Mapping[str, str]) -> list[str]:
    """The structured names of ``parameters`` (tensors or group dicts) that ``name_dict`` knows;
    all of ``name_dict``'s when there is no list (a static program's ``parameters=None``)."""
    if not isinstance(parameters, Iterable) or isinstance(parameters, (str, Mapping)):
        return list(name_dict.values())
    tensors = []
    for entry in parameters:
        tensors.extend(entry.get("params", ()) if isinstance(entry, Mapping) else [entry])
    paddle_names = [getattr(tensor, "name", None) for tensor in tensors]
    return [name_dict[name] for name in paddle_names if isinstance(name, str) and name in name_dict]


def warn_if_no_encoder_layers(
    set_param_lr_fun: Any, layerwise_decay: Any, name_dict: Mapping[str, str] | None, parameters: Any
) -> None:
    """Warn when :func:`layerwise_lr_decay` would decay (nearly) nothing: no parameter is in an ``encoder.layers.N`` block.

    :func:`layerwise_lr_decay` reads PaddleNLP's BERT/ERNIE names only (it
    declares ``block_names = "encoder.layers.N"``, the one family it reads), so on
    LLaMA (``model.layers.N``), GPT-2 (``h.N``), ViT (``blocks.N``) or
    Hugging Face-style BERT (``encoder.layer.N``) names every parameter keeps
    ratio 1 except those named ``embedding``. The numbers stay PaddleNLP's;
    the :class:`~paddle_llrd.LayerMapWarning` says so and names :class:`~paddle_llrd.LayerMap` /
    :func:`~paddle_llrd.make_layerwise_fn`, which read those families. Silent
    when ``set_param_lr_fun`` declares no such fixed family (a ``LayerMap``
    reads the families it is given), the decay is off (:func:`decay_is_off`),
    there is no ``name_dict`` or it knows none of ``parameters``
    (the errors for those come elsewhere).

    Args:
        set_param_lr_fun: :class:`~paddle_llrd.AdamWDL`'s argument, as given.
        layerwise_decay: its decay rate (a float or a Tensor).
        name_dict: ``{param.name: structured name}``.
        parameters: the parameters or parameter-group dicts, or ``None`` (then
            every name in ``name_dict`` counts).

    Examples:
        >>> import warnings
        >>> from paddle_llrd import layerwise_lr_decay
        >>> from paddle_llrd.layer_decay.layerwise import warn_if_no_encoder_layers
        >>> llama = {"p0": "model.embed_tokens.weight", "p1": "model.layers.0.mlp.weight"}
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     warn_if_no_encoder_layers(layerwise_lr_decay, 0.8, llama, None)
        >>> "make_layerwise_fn" in str(caught[0].message)
        True
        >>> bert = {"p0": "bert.encoder.layers.0.linear1.weight"}
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("error")
        ...     warn_if_no_encoder_layers(layerwise_lr_decay, 0.8, bert, None)
    """
    block_names = getattr(set_param_lr_fun, "block_names", None)
    read = getattr(set_param_lr_fun, "block_index", None)
    if block_names is None or not callable(read) or not isinstance(name_dict, Mapping):
        return
    if decay_is_off(layerwise_decay):
        return
    names = _parameter_names(parameters, name_dict)
    if not names or any(read(name) is not None for name in names):
        return
    embeddings = sum(_EMBEDDING_MARKER in name for name in names)
    shown = ", ".join(repr(name) for name in names[:_NAMES_QUOTED])
    more = f", ... ({len(names)} in all)" if len(names) > _NAMES_QUOTED else ""
    warnings.warn(
        f"AdamWDL: layerwise_decay={layerwise_decay!r} with the default set_param_lr_fun "
        f"(layerwise_lr_decay), but no parameter's structured name has an `{block_names}` block "
        f"(names: {shown}{more}), so {len(names) - embeddings} of its {len(names)} parameters get ratio 1 "
        f"and {embeddings} (those whose name contains {_EMBEDDING_MARKER!r}) a decayed one: "
        "layerwise_lr_decay reads PaddleNLP BERT/ERNIE names only (these are PaddleNLP's numbers, "
        "kept). For LLaMA, GPT, ViT or Hugging "
        "Face-style BERT (encoder.layer.N) names use a LayerMap: `fn, name_dict = "
        "paddle_llrd.make_layerwise_fn(model)` and AdamWDL(..., set_param_lr_fun=fn, "
        "name_dict=name_dict, n_layers=fn.n_layers).",
        LayerMapWarning,
        stacklevel=stacklevel_outside_package(),
    )


def _encoder_block(structured_name: str) -> int | None:
    """The ``encoder.layers.N`` index :func:`layerwise_lr_decay` reads, or ``None``."""
    index_text = _block_index_text(structured_name)
    return int(index_text) if index_text is not None and index_text.isdecimal() else None


def deepest_block_read(set_param_lr_fun: Any, names: Iterable[str]) -> int | None:
    """The largest block index the ratio function reads in ``names``; ``None`` when it is not known.

    Known for a function that declares how it reads a block index
    (``block_index``): :func:`layerwise_lr_decay` (``encoder.layers.N``) and a
    :class:`~paddle_llrd.LayerMap`; not for a pipeline map (its names are
    positions, and a stage holds some of the blocks) or another function.
    """
    read = getattr(set_param_lr_fun, "block_index", None)
    if not callable(read) or isinstance(set_param_lr_fun, PipelineLayerMap):
        return None
    try:
        indices = [index for index in map(read, names) if index is not None]
    except ValueError:  # a pattern that captures no index: the ratio function names it when asked
        return None
    return max(indices) if indices else None


def warn_if_n_layers_exceeds_blocks(n_layers: int, deepest_block: int | None, decay: Any, owner: str) -> None:
    """A :class:`~paddle_llrd.LayerMapWarning` naming both numbers when ``n_layers`` is above the blocks the ratios read.

    A ratio is ``decay ** (n_layers - i)`` for block ``i``: with ``n_layers``
    left at AdamWDL's default 12 on a 2-block model, the top block trains at
    ``decay ** 11`` of the head's rate instead of ``decay``. Silent when the
    blocks are unknown (``deepest_block`` None) or ``decay`` is 1.0.

    Examples:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     warn_if_n_layers_exceeds_blocks(12, 1, 0.8, "AdamWDL")
        >>> print(caught[0].message)  # doctest: +ELLIPSIS
        AdamWDL: n_layers=12 but the deepest block the layer ratios read is block 1 (2 blocks): ...
    """
    if deepest_block is None or n_layers <= deepest_block + 1 or decay_is_off(decay):
        return
    counted = deepest_block + 1
    top = ""
    if isinstance(decay, float):
        top = (f" the top block trains at {decay!r}**{n_layers - deepest_block} = "
               f"{decay ** (n_layers - deepest_block):.3g} of the head's rate instead of {decay!r}, and")
    warnings.warn(
        f"{owner}: n_layers={n_layers} but the deepest block the layer ratios read is block {deepest_block} "
        f"({counted} blocks):{top} every ratio is {n_layers - counted} powers of the decay smaller than with "
        f"n_layers={counted}. Pass n_layers={counted} (the model's number of blocks).",
        LayerMapWarning,
        stacklevel=stacklevel_outside_package(),
    )


def warn_if_n_layers_exceeds_read_blocks(
    set_param_lr_fun: Any, layerwise_decay: Any, n_layers: Any, name_dict: Mapping[str, str] | None, parameters: Any
) -> None:
    """:func:`warn_if_n_layers_exceeds_blocks` for :class:`~paddle_llrd.AdamWDL`'s arguments (the
    blocks read in ``parameters``' structured names; a LayerMap's own ``n_layers`` where it has one)."""
    if not isinstance(name_dict, Mapping):
        return
    deepest = deepest_block_read(set_param_lr_fun, _parameter_names(parameters, name_dict))
    used = getattr(set_param_lr_fun, "n_layers", None)  # the function's own; None: the optimizer's
    used = n_layers if used is None else used
    if isinstance(used, int) and not isinstance(used, bool):
        warn_if_n_layers_exceeds_blocks(used, deepest, layerwise_decay, "AdamWDL")


def reads_optimizer_n_layers(set_param_lr_fun: Any) -> bool:
    """Whether ``set_param_lr_fun`` declares that its ``n_layers`` is the optimizer's
    (an ``n_layers`` attribute of None, as :func:`layerwise_lr_decay` and a
    :class:`~paddle_llrd.LayerMap` built without one declare); the optimizer
    then checks its ``n_layers`` as a number of blocks. A function that
    declares nothing may read ``n_layers`` its own way.

    Examples:
        >>> from paddle_llrd import LayerMap
        >>> reads_optimizer_n_layers(layerwise_lr_decay), reads_optimizer_n_layers(LayerMap(n_layers=2))
        (True, False)
        >>> reads_optimizer_n_layers(lambda decay, names, n, param: 1.0)
        False
    """
    return hasattr(set_param_lr_fun, "n_layers") and set_param_lr_fun.n_layers is None


# What the default rule is, declared as a LayerMap declares it, so that the
# optimizer, its table and the warnings read these rather than ask which function it is.
layerwise_lr_decay.pure_in_name = True  # its ratio depends on the structured name only: AdamWDL caches it
layerwise_lr_decay.needs_name_dict = True  # it reads the structured names (unless the decay is off)
layerwise_lr_decay.n_layers = None  # it has none of its own: the optimizer's n_layers
layerwise_lr_decay.layer_id = layer_id_of
layerwise_lr_decay.block_index = _encoder_block
layerwise_lr_decay.block_names = _LAYER_MARKER + "N"  # the only blocks it reads (a LayerMap reads the families given)
