"""``python -m paddle_llrd tiny-llama [FOLDER]``: a small random LLaMA to try ``train`` with.

Writes, offline, a PaddleFormers model folder (``LlamaForCausalLM`` from a
``LlamaConfig``, random weights, ``save_pretrained``; a word-level tokenizer
of 64 words) and a few lines of erniekit data beside it: ``train.jsonl`` and
``dev.jsonl`` (``{"src": ..., "tgt": ...}``: continue a counting sequence)
and ``dpo.jsonl`` (preference pairs, the higher ``sort`` chosen). Every
config of docs/paddleformers_cli.rst trains on it on a CPU. The model is
built for that: ``fuse_rms_norm: false`` (the fused RMSNorm kernel is
GPU-only), an untied head (it trains at ratio 1, apart from the
embeddings), ``max_position_embeddings`` 4096 (the CLI's default
``max_seq_len``; RoPE has no weights, so the model stays tiny).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import List, Optional

from paddle_llrd.cli.argparse_types import integer_at_least
from paddle_llrd.cli.train_console import captured_output
from paddle_llrd.cli.train_env import train_environment_error

__all__ = ["DATA_FILES", "WORDS", "main", "write_tiny_llama"]

PROG = "python -m paddle_llrd tiny-llama"
#: The tokenizer's vocabulary: four special tokens, then w0 ... w59.
WORDS = ["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(60)]
#: The data files written beside the model, and how many lines each holds.
DATA_FILES = {"train.jsonl": 32, "dev.jsonl": 8, "dpo.jsonl": 32}
_SEQUENCE = 9  # words of a counting sequence: 4 of prompt, 4 of answer, 1 more for DPO's rejected answer


def _counting_sequence(rng: random.Random) -> List[str]:
    start, stride = rng.randrange(60), rng.randrange(1, 4)
    return [f"w{(start + stride * j) % 60}" for j in range(_SEQUENCE)]


def _write_data(folder: Path, seed: int) -> None:
    rng = random.Random(seed)
    for name, lines in DATA_FILES.items():
        with open(folder / name, "w") as file:
            for _ in range(lines):
                words = _counting_sequence(rng)
                prompt, answer, shifted = " ".join(words[:4]), " ".join(words[4:8]), " ".join(words[5:9])
                if name == "dpo.jsonl":
                    record = {"src": [prompt], "tgt": [], "response": [answer, shifted], "sort": [1, 0]}
                else:
                    record = {"src": prompt, "tgt": answer}
                file.write(json.dumps(record) + "\n")


def write_tiny_llama(folder: Path, n_layers: int = 3, seed: int = 0) -> Path:
    """The model, its tokenizer and the data files of :data:`DATA_FILES` in ``folder`` (created).

    Raises:
        ImportError: PaddleFormers does not import here (the message says how to set it up).

    Examples:
        >>> import json, tempfile
        >>> folder = write_tiny_llama(Path(tempfile.mkdtemp()) / "tiny-llama", n_layers=2)
        >>> json.loads((folder / "config.json").read_text())["num_hidden_layers"]
        2
        >>> json.loads((folder / "train.jsonl").read_text().splitlines()[0]).keys()
        dict_keys(['src', 'tgt'])
    """
    with captured_output():  # PaddleFormers' import notices ("PyTorch was not found", ...)
        try:
            import paddle
            from paddleformers.transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
            from tokenizers import Tokenizer, models, pre_tokenizers
        except ImportError as exc:
            raise train_environment_error("tiny-llama", exc) from exc
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.WordLevel(vocab={word: i for i, word in enumerate(WORDS)}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                            unk_token="<unk>").save_pretrained(folder)
    paddle.seed(seed)
    config = LlamaConfig(vocab_size=len(WORDS), hidden_size=32, intermediate_size=64, num_hidden_layers=n_layers,
                         num_attention_heads=4, max_position_embeddings=4096, fuse_rms_norm=False,
                         tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    LlamaForCausalLM(config).save_pretrained(folder)
    for signal in folder.glob("saved_signal_*"):  # save_pretrained's note to its own async saver, not the model's
        signal.unlink()
    _write_data(folder, seed)
    return folder


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Write a small random LLaMA (model and tokenizer) and a few lines of SFT and DPO data into "
                    "FOLDER, offline, to try `python -m paddle_llrd train` with on a CPU.",
    )
    parser.add_argument("folder", nargs="?", default="tiny-llama", help="where to write (default: tiny-llama)")
    parser.add_argument("--layers", type=integer_at_least(1), default=3, help="decoder blocks (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights and the data (default 0)")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """The ``tiny-llama`` command; refuses (exit status 2) a FOLDER that exists and is not empty."""
    options = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    folder = Path(options.folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        print(f"{PROG}: error: {options.folder!r} exists and is not an empty folder; name a new one",
              file=sys.stderr, flush=True)
        return 2
    try:
        with captured_output():  # PaddleFormers logs each file it saves
            write_tiny_llama(folder, options.layers, options.seed)
    except ImportError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr, flush=True)
        return 2
    data = ", ".join(f"{name} ({lines} lines)" for name, lines in DATA_FILES.items())
    print(f"wrote {options.folder}: a LlamaForCausalLM of {options.layers} blocks (hidden size 32, {len(WORDS)} "
          f"words, untied head, fuse_rms_norm false for the CPU), its tokenizer, and {data}")
    return 0
