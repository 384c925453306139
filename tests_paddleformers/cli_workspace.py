"""A tiny local LLaMA and jsonl data for ``python -m paddle_llrd train``, as a
user would have them: a PaddleFormers model folder (``save_pretrained``, a
word-level tokenizer) and erniekit SFT / preference data, all generated here.

``max_position_embeddings`` is the CLI's default ``max_seq_len`` (4096), so a
documented config that leaves ``max_seq_len`` out runs as written; RoPE has
no weights, so the model stays tiny.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

WORDS = ["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(60)]


def build_workspace(root: Path, n_layers: int) -> Path:
    """``root/model`` (untied head, ``fuse_rms_norm: false``), ``root/train.jsonl`` and ``root/dpo.jsonl``."""
    import paddle
    from paddleformers.transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel(vocab={word: i for i, word in enumerate(WORDS)}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                            unk_token="<unk>").save_pretrained(root / "model")
    paddle.seed(0)
    config = LlamaConfig(vocab_size=len(WORDS), hidden_size=32, intermediate_size=64, num_hidden_layers=n_layers,
                         num_attention_heads=4, max_position_embeddings=4096, fuse_rms_norm=False,
                         tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    LlamaForCausalLM(config).save_pretrained(root / "model")
    rng = random.Random(0)
    with open(root / "train.jsonl", "w") as sft, open(root / "dpo.jsonl", "w") as dpo:
        for _ in range(32):  # counting sequences: continue the prompt's stride
            start, stride = rng.randrange(60), rng.randrange(1, 4)
            words = [f"w{(start + stride * j) % 60}" for j in range(9)]
            sft.write(json.dumps({"src": " ".join(words[:4]), "tgt": " ".join(words[4:8])}) + "\n")
            # erniekit preference data: the higher "sort" marks the chosen response
            dpo.write(json.dumps({"src": [" ".join(words[:4])], "tgt": [],
                                  "response": [" ".join(words[4:8]), " ".join(words[5:9])], "sort": [1, 0]}) + "\n")
    return root
