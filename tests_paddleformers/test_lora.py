"""LoRA with a real PaddleFormers 1.2.0 ``LoRAModel`` over a tiny LLaMA:
``layer_map="auto"`` gives the adapters of block i (``model.model.layers.i.
....lora_A/B``) the ratio d**(L-i), and PaddleFormers' LoRA+ boost
(``lora_plus_scale``, an lr factor on every ``lora_B``) stays on top of it,
in LLRDTrainer (AdamWDL) and in layer_decay_param_groups. The numbers are
Adam's first step, whose largest entry is ``lr * ratio * factor``, with the
ratios written out here."""
from __future__ import annotations

import re

import numpy as np
import paddle
import pytest
from paddleformers.peft import LoRAConfig, LoRAModel
from paddleformers.transformers import LlamaConfig, LlamaForCausalLM
from support import TokenDataset
from trainer_checks import parameters_numpy

from paddle_llrd import layer_decay_param_groups
from paddle_llrd.integrations.paddleformers import LLRDTrainer, LLRDTrainingArguments

N_LAYERS, DECAY, LORA_PLUS, LR = 2, 0.5, 4.0, 1e-2


def make_lora_model(seed: int = 3) -> LoRAModel:
    """LoRA (r=4) on q_proj and v_proj, lora_B made non-zero so that lora_A has a gradient at the first step."""
    paddle.seed(seed)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=N_LAYERS,
                         num_attention_heads=4, max_position_embeddings=32, fuse_rms_norm=False)
    config._attn_implementation = "eager"
    model = LoRAModel(LlamaForCausalLM(config), LoRAConfig(target_modules=[".*q_proj.*", ".*v_proj.*"], r=4,
                                                           lora_alpha=8, lora_plus_scale=LORA_PLUS))
    model.mark_only_lora_as_trainable()
    for name, param in model.named_parameters():
        if name.endswith("lora_B"):
            param.set_value(paddle.randn(param.shape) * 0.1)
    return model


def expected_rate(name: str) -> float:
    """lr * d**(L-i) for an adapter of block i, times lora_plus_scale on lora_B."""
    block = int(re.search(r"\.layers\.(\d+)\.", name).group(1))
    return LR * DECAY ** (N_LAYERS - block) * (LORA_PLUS if name.endswith("lora_B") else 1.0)


def assert_first_step_rates(model, before) -> None:
    after = parameters_numpy(model)
    trainable = {name for name, param in model.named_parameters() if not param.stop_gradient}
    assert trainable and all(re.search(r"\.lora_[AB]$", name) for name in trainable)
    for name in before:
        largest_move = float(np.max(np.abs(after[name] - before[name])))
        if name in trainable:
            assert largest_move == pytest.approx(expected_rate(name), rel=2e-3), name
        else:
            assert largest_move == 0.0, name  # the frozen base model


def test_layer_map_auto_gives_each_blocks_adapters_its_ratio_and_keeps_lora_plus_in_llrd_trainer(tmp_path):
    model = make_lora_model()
    before = parameters_numpy(model)
    args = LLRDTrainingArguments(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=8,
                                 learning_rate=LR, lr_scheduler_type="constant", weight_decay=0.0,
                                 adam_epsilon=1e-15, layerwise_decay=DECAY, save_strategy="no", disable_tqdm=True)
    trainer = LLRDTrainer(model=model, args=args, train_dataset=TokenDataset())
    trainer.train()
    assert trainer.n_layers == N_LAYERS
    assert_first_step_rates(model, before)


def test_layer_decay_param_groups_keeps_lora_plus_on_a_lora_model():
    model = make_lora_model()
    groups = layer_decay_param_groups(model, DECAY)
    names = {id(param): name for name, param in model.named_parameters()}
    for group in groups:
        for param in group["params"]:
            assert LR * group["learning_rate"] == pytest.approx(expected_rate(names[id(param)]), rel=1e-12)
    before = parameters_numpy(model)
    optimizer = paddle.optimizer.AdamW(learning_rate=LR, parameters=groups, epsilon=1e-15, weight_decay=0.0)
    dataset = TokenDataset()
    ids = paddle.to_tensor([dataset[i]["input_ids"] for i in range(8)])
    output = model(input_ids=ids, labels=ids)
    (output[0] if isinstance(output, (tuple, list)) else output.loss).backward()
    optimizer.step()
    assert_first_step_rates(model, before)
