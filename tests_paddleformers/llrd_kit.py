"""The PaddleFormers ``Kit`` for the Trainer-level tests both integrations
share (tests_shared/trainer_checks.py, tests_shared/trainer_suite.py): a tiny
LLaMA from support.py, with the head untied so that it is a parameter of its
own (``lm_head.weight``, ratio 1)."""
from __future__ import annotations

import functools

import paddle
from paddleformers.trainer import PdArgumentParser, TrainerCallback
from paddleformers.transformers import LlamaForCausalLM
from support import N_LAYERS, TokenDataset, make_llama
from trainer_checks import Kit, layer_ratio

from paddle_llrd.integrations.paddleformers import LLRDTrainer, LLRDTrainingArguments, get_last_checkpoint


#: Embeddings ``d**(L+1)``, block ``i`` ``d**(L-i)``, final norm and head ``1``: ``(structured name, d, L) -> ratio``.
llama_ratio = functools.partial(layer_ratio, block=r"(?:^|\.)layers\.(\d+)\.", embedding="embed_tokens")


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
    last_checkpoint=get_last_checkpoint,
    load_model=LlamaForCausalLM.from_pretrained,
)
