"""Layer-wise learning-rate decay ratios for BERT-style parameter names.

:func:`layerwise_lr_decay` is the default ``set_param_lr_fun`` of
:class:`paddle_llrd.AdamWDL`. It maps a parameter to the factor its learning
rate is multiplied by: the top of the network trains at the full rate and
every layer below it at ``decay_rate`` times the rate of the layer above
(XLNet/ELECTRA-style "layer-wise decay", https://arxiv.org/abs/1906.08237).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["layer_id_of", "layerwise_lr_decay", "NAME_DICT_ADVICE"]

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


def _layer_id(structured_name: str, n_layers: int, caller: str, param_name: str | None = None) -> int:
    """The layer id of the rule (0 embeddings, ``i + 1`` encoder layer ``i``, ``n_layers + 1`` the rest).

    ``caller`` and ``param_name`` only name the culprit in error messages.
    """
    if _LAYER_MARKER not in structured_name:
        return 0 if _EMBEDDING_MARKER in structured_name else n_layers + 1
    context = caller if param_name is None else f"{caller} (parameter {param_name!r})"
    start = structured_name.find(_LAYER_MARKER) + len(_LAYER_MARKER)
    index_text = structured_name[start:].split(".", 1)[0]
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
            ``None`` only when ``decay_rate == 1.0`` (every ratio is then 1).
        n_layers (int): The number of encoder layers ``L``; layer indices must be
            below it.
        param (Tensor): The parameter.

    Returns:
        float: The ratio (a Tensor if ``decay_rate`` is one).

    Raises:
        KeyError: ``param.name`` is missing from ``name_dict``; the message names
            the parameter and says how to build ``name_dict``.
        TypeError: ``name_dict`` is ``None`` while ``decay_rate != 1.0``.
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
    if name_dict is None and isinstance(decay_rate, float) and decay_rate == 1.0:
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
