"""``python -m paddle_llrd lr-table --arch llama`` where PaddleFormers is
installed: it shows PaddleFormers' own ``LlamaForCausalLM``, and the stand-in
that the command shows without PaddleFormers has exactly its names."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from paddleformers.transformers import LlamaConfig, LlamaForCausalLM

from paddle_llrd.models.skeletons import build_skeleton

ROOT = Path(__file__).resolve().parents[1]
N_LAYERS = 3


def llama_names(tied: bool) -> list:
    config = LlamaConfig(vocab_size=16, hidden_size=8, intermediate_size=8, num_hidden_layers=N_LAYERS,
                         num_attention_heads=2, max_position_embeddings=8, tie_word_embeddings=tied)
    return [name for name, _ in LlamaForCausalLM(config).named_parameters()]


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_lr_table_shows_paddleformers_llama_and_the_stand_in_has_its_names(tied):
    flags = ["--arch", "llama", "--layers", str(N_LAYERS), "--decay", "0.5", "--style", "params"]
    flags += [] if tied else ["--no-tie-word-embeddings"]
    done = subprocess.run([sys.executable, "-m", "paddle_llrd", "lr-table", *flags], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    expected = llama_names(tied)
    shown, prefix = [], ""
    for line in lines[1:]:
        if line.startswith("  "):
            shown.append(prefix + line.split()[0])
        elif line.split()[0].endswith(":"):
            prefix = line.partition(": ")[2]
    assert shown == expected
    assert lines[-1] == "model: PaddleFormers LlamaForCausalLM", lines[-1]
    tie_line = "lm_head.weight is tied to model.embed_tokens.weight (embeddings_tied_head)"
    assert (tie_line in lines) == tied
    stand_in = build_skeleton("llama", N_LAYERS, tie_word_embeddings=tied)
    assert [name for name, _ in stand_in.named_parameters()] == expected
