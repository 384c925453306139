"""VisualDL's hyperparameter record with any ``TrainingArguments``.

PaddleNLP 2.8.1's ``VisualDLCallback`` passes ``to_sanitized_dict()`` to
``add_hparams``, whose protobuf refuses a bool (``Expected an int, got a
boolean``), so a run with PaddleNLP's own ``TrainingArguments`` fails when
training begins; PaddleFormers' converts them itself, and getting ints there
changes nothing.
"""
from __future__ import annotations

from typing import Any, Dict

__all__ = ["IntHyperparameters", "IntHyperparametersCallback"]


class IntHyperparameters:
    """``args`` as VisualDL's callback reads them: bools as ints in
    ``to_sanitized_dict``, every other attribute the arguments' own."""

    def __init__(self, args: Any) -> None:
        self._args = args

    def __getattr__(self, name: str) -> Any:
        return getattr(self._args, name)

    def to_sanitized_dict(self) -> Dict[str, Any]:
        return {key: int(value) if isinstance(value, bool) else value
                for key, value in self._args.to_sanitized_dict().items()}


class IntHyperparametersCallback:
    """Mixed in before a framework's ``VisualDLCallback``: its ``on_train_begin``
    reads the arguments through :class:`IntHyperparameters`."""

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        return super().on_train_begin(IntHyperparameters(args), state, control, **kwargs)
