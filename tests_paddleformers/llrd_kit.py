"""The PaddleFormers ``Kit`` for the Trainer-level tests both integrations
share (tests_shared/trainer_checks.py, tests_shared/trainer_suite.py): a tiny
LLaMA from support.py, with the head untied so that it is a parameter of its
own (``lm_head.weight``, ratio 1)."""
from __future__ import annotations

import re

import paddle
from paddleformers.trainer import PdArgumentParser, TrainerCallback
from paddleformers.transformers import LlamaForCausalLM
from support import N_LAYERS, TokenDataset, make_llama
from trainer_checks import Kit

from paddle_llrd.integrations.paddleformers import LLRDTrainer, LLRDTrainingArguments


def llama_ratio(structured_name: str, decay: float, n_layers: int) -> float:
    """Embeddings ``d**(L+1)``, block ``i`` ``d**(L-i)``, final norm and head ``1``."""
    block = re.search(r"(?:^|\.)layers\.(\d+)\.", structured_name)
    if block:
        return decay ** (n_layers - int(block.group(1)))
    if "embed_tokens" in structured_name:
        return decay ** (n_layers + 1)
    return 1.0


def language_model_loss(model, dataset) -> float:
    """The model's own next-token loss over the whole data set as one batch."""
    ids = paddle.to_tensor([dataset[i]["input_ids"] for i in range(len(dataset))])
    with paddle.no_grad():
        output = model(input_ids=ids, labels=ids)
    loss = output[0] if isinstance(output, (tuple, list)) else output.loss
    return float(loss)


KIT = Kit(
    trainer_class=LLRDTrainer,
    arguments_class=LLRDTrainingArguments,
    parser_class=PdArgumentParser,
    callback_class=TrainerCallback,
    make_model=lambda seed=7: make_llama(seed=seed, tie_word_embeddings=False),
    make_dataset=TokenDataset,
    family="llama",
    block_regex=r"model\.layers\.(\d+)\.",
    expected_ratio=llama_ratio,
    n_layers=N_LAYERS,
    loss=language_model_loss,
    load_model=LlamaForCausalLM.from_pretrained,
    quiet_settings=dict(per_device_train_batch_size=8, logging_steps=1, save_strategy="no", report_to=[],
                        disable_tqdm=True, seed=11),
)
