"""The names of the layer groups that the Trainer logs and ``lr-table`` show, tied heads included.

A group is one layer id of a :class:`~paddle_llrd.LayerMap`:
``"embeddings"`` (id 0), ``"layer_<i>"`` (block ``i``, id ``i + 1``) and
``"head"`` (id ``L + 1``), as :func:`~paddle_llrd.layer_decay.grad_norms.layer_group_name`
names them. A tied head (``tie_word_embeddings=True``, LLaMA's default in
PaddleFormers) is the embedding weight itself: one parameter that
``named_parameters()`` lists once, under the embeddings' name, so it trains at
the embeddings' ratio. Named plainly, the group ``"head"`` would then hold no
head (only ``model.norm`` for LLaMA) and the head's rate would show under
``"embeddings"``; :func:`layer_group_names` renames both: the embeddings'
group becomes ``"embeddings_tied_head"`` and the top group ``"final_norm"``
(``"top"`` when it holds more than norms).

Examples:
    >>> from paddle_llrd.layer_decay.layer_maps import LayerMap
    >>> from paddle_llrd.models.skeletons import build_skeleton
    >>> model = build_skeleton("llama", 2, tie_word_embeddings=True)
    >>> names = layer_group_names(model, LayerMap.from_model(model))
    >>> [names.of(k) for k in range(4)]
    ['embeddings_tied_head', 'layer_0', 'layer_1', 'final_norm']
    >>> print(names.ties[0])
    lm_head.weight is tied to model.embed_tokens.weight (embeddings_tied_head)
    >>> untied = build_skeleton("llama", 2, tie_word_embeddings=False)
    >>> [layer_group_names(untied, LayerMap.from_model(untied)).of(k) for k in range(4)]
    ['embeddings', 'layer_0', 'layer_1', 'head']
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Tuple

from paddle import nn

from .grad_norms import layer_group_name
from .layer_maps import LayerMap

__all__ = ["Tie", "LayerGroupNames", "tied_parameters", "layer_group_names"]

_HEAD = "head"


def tied_parameters(model: nn.Layer) -> Dict[str, Tuple[str, ...]]:
    """Each parameter registered under more than one structured name:
    ``{the name named_parameters() lists: (its other names, ...)}``.

    Examples:
        >>> from paddle_llrd.models.skeletons import build_skeleton
        >>> tied_parameters(build_skeleton("llama", 1, tie_word_embeddings=True))
        {'model.embed_tokens.weight': ('lm_head.weight',)}
    """
    names_by_id: Dict[int, List[str]] = {}
    # named_parameters() drops a parameter's second name; each sublayer's own table keeps it
    for prefix, layer in model.named_sublayers(include_self=True):
        for key, param in layer._parameters.items():
            if param is not None:
                names_by_id.setdefault(id(param), []).append(f"{prefix}.{key}" if prefix else key)
    listed = {id(param): name for name, param in model.named_parameters()}
    return {
        listed[key]: tuple(name for name in names if name != listed[key])
        for key, names in names_by_id.items()
        if len(names) > 1 and key in listed
    }


@dataclass(frozen=True)
class Tie:
    """A parameter trained under ``name`` (its group ``group``) that is also ``alias``."""

    name: str
    alias: str
    group: str

    def __str__(self) -> str:
        return f"{self.alias} is tied to {self.name} ({self.group})"


@dataclass(frozen=True)
class LayerGroupNames:
    """The group name of each layer id of a model of ``n_layers`` blocks, and the ties behind any rename."""

    n_layers: int
    renames: Dict[str, str] = field(default_factory=dict)
    ties: Tuple[Tie, ...] = ()

    def of(self, layer_id: int) -> str:
        """The name of the group of ``layer_id``."""
        plain = layer_group_name(layer_id, self.n_layers)
        return self.renames.get(plain, plain)


def layer_group_names(model: nn.Layer, layer_map: LayerMap) -> LayerGroupNames:
    """The group names of ``model``'s layer ids under ``layer_map``: the plain
    ones, with the renames a tied head asks for (see the module documentation)."""
    n_layers = layer_map.n_layers

    def plain_group(name: str) -> str:
        return layer_group_name(layer_map.layer_id(name, n_layers), n_layers)

    renames: Dict[str, str] = {}
    moved: List[Tuple[str, str]] = []  # (trained name, alias) whose alias's group is another
    for name, aliases in tied_parameters(model).items():
        for alias in aliases:
            group, alias_group = plain_group(name), plain_group(alias)
            if alias_group != group:
                renames.setdefault(group, f"{group}_tied_{alias_group}")
                moved.append((name, alias))
                if alias_group == _HEAD:
                    # the top group keeps what is left: for LLaMA/GPT, the final norm alone
                    rest = [n for n, _ in model.named_parameters() if plain_group(n) == _HEAD]
                    renames[_HEAD] = "final_norm" if rest and all("norm" in n for n in rest) else "top"
    ties = tuple(Tie(name, alias, renames[plain_group(name)]) for name, alias in moved)
    return LayerGroupNames(n_layers, renames, ties)
