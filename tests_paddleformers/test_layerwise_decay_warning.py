"""The Trainer/CLI field layerwise_decay above 1 warns once, naming the value
(the check AdamWDL and layer_decay_param_groups share), in a user's script
run in a fresh process with Python's default warning filters; the optimizer
the Trainer builds from it does not warn a second time."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_training_arguments_with_a_layerwise_decay_above_one_warn_once(tmp_path):
    script = tmp_path / "args.py"
    script.write_text(textwrap.dedent(f"""\
        from paddleformers.transformers import LlamaConfig, LlamaForCausalLM
        from paddle_llrd.integrations.paddleformers import LLRDTrainer, LLRDTrainingArguments

        args = LLRDTrainingArguments(output_dir={str(tmp_path / "out")!r}, layerwise_decay=1.5, max_steps=2)
        config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=4, max_position_embeddings=32, fuse_rms_norm=False)
        trainer = LLRDTrainer(model=LlamaForCausalLM(config), args=args)
        trainer.create_optimizer_and_scheduler(num_training_steps=2)
        print("layerwise_decay", trainer.optimizer.layerwise_decay)
    """))
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "layerwise_decay 1.5" in done.stdout
    ours = [line for line in done.stderr.splitlines() if "lower layers train faster" in line]
    assert len(ours) == 1, done.stderr[-3000:]
    assert "`layerwise_decay`=1.5 is greater than 1, so lower layers train faster than the head" in ours[0]
