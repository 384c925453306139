"""A tiny local LLaMA and jsonl data for ``python -m paddle_llrd train``, as a
user gets them: what ``python -m paddle_llrd tiny-llama`` writes
(:func:`paddle_llrd.cli.tiny_llama.write_tiny_llama`: a PaddleFormers model
folder with a word-level tokenizer, erniekit SFT data ``train.jsonl`` and
``dev.jsonl`` and preference data ``dpo.jsonl`` beside it).
"""
from __future__ import annotations

from pathlib import Path

from paddle_llrd.cli.tiny_llama import write_tiny_llama


def build_workspace(root: Path, n_layers: int) -> Path:
    """``root/model``: the tiny LLaMA of ``n_layers`` blocks (untied head, ``fuse_rms_norm: false``) and its data."""
    write_tiny_llama(root / "model", n_layers)
    return root
