"""What a user-path script hands back to its test (``harness.run``).

``save(lrs=[...], weights={"name": array})`` writes one ``.npz`` at
``$USER_PATH_OUT``: plain values under their key, a dict's entries under
``key/name``. A script calls it once, at its end.
"""
from __future__ import annotations

import os

import numpy as np


def save(**values) -> None:
    flat = {}
    for key, value in values.items():
        if isinstance(value, dict):
            flat.update({f"{key}/{name}": np.asarray(item) for name, item in value.items()})
        else:
            flat[key] = np.asarray(value)
    np.savez(os.environ["USER_PATH_OUT"], **flat)
