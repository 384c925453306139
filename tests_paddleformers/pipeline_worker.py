"""One stage of PaddleFormers' ``LlamaForCausalLMPipe`` (pipeline-parallel
LLaMA), started on CPU ranks by ``python -m paddle.distributed.launch
--nproc_per_node 2`` over gloo; ``tests_paddleformers/test_pipeline_layer_map.py``
starts it::

    python -m paddle.distributed.launch --nproc_per_node 2 \\
        tests_paddleformers/pipeline_worker.py --out-dir OUT

Each rank builds its stage of a 4-block model (``pp_degree`` 2), with an untied
and with a tied (``tie_word_embeddings``) head, resolves the
layer map the way ``LLRDTrainer`` does (``resolve_layer_map("auto", model,
config.num_hidden_layers)``), builds :class:`paddle_llrd.AdamWDL` with it and
writes ``<out-dir>/rank<r>.json`` (``{"untied": ..., "tied": ...}``): for each parameter its name on the stage,
PaddleFormers' own single-model name for it (``state_dict()``'s mapping), the
map's layer id, and the ratio the optimizer's ``param_lr_table()`` shows.

Paddle 3.3.1's ``PipelineLayer`` cannot be built on a CPU-only build:
``PipelineLayer.__init__`` reads ``dist.ParallelEnv().device_id``, which has
no value there (``AttributeError: 'ParallelEnv' object has no attribute
'_device_id'``). The worker gives ``ParallelEnv`` device 0 for that read; the
layer descriptions, their split into stages and the parameter names are
Paddle's and PaddleFormers' own.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

import paddle.distributed as dist
from paddle.distributed import fleet

PIPELINE_DEGREE = 2
N_LAYERS = 4
DECAY = 0.5


def init_pipeline() -> None:
    strategy = fleet.DistributedStrategy()
    strategy.hybrid_configs = {"dp_degree": 1, "mp_degree": 1, "pp_degree": PIPELINE_DEGREE, "sharding_degree": 1}
    strategy.pipeline_configs = {"accumulate_steps": 1, "micro_batch_size": 1}
    fleet.init(is_collective=True, strategy=strategy)


def build_stage(tied: bool):
    from paddleformers.transformers import LlamaConfig
    from paddleformers.transformers.llama.modeling import LlamaForCausalLMPipe

    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=N_LAYERS,
                         num_attention_heads=4, max_position_embeddings=64, fuse_rms_norm=False,
                         tie_word_embeddings=tied)
    config.pipeline_parallel_degree = PIPELINE_DEGREE
    if not hasattr(dist.ParallelEnv, "_device_id"):  # see the module docstring
        dist.ParallelEnv._device_id = 0
    return LlamaForCausalLMPipe(config)


def describe(model) -> dict:
    from paddle_llrd import AdamWDL, build_name_dict, resolve_layer_map

    layer_map = resolve_layer_map("auto", model, model.config.num_hidden_layers)
    optimizer = AdamWDL(learning_rate=1.0, parameters=model.parameters(), layerwise_decay=DECAY,
                        n_layers=layer_map.n_layers, set_param_lr_fun=layer_map, name_dict=build_name_dict(model))
    optimizer_ratios = {row.name: row.ratio for row in optimizer.param_lr_table()}
    model._set_pipeline_name_mapping()  # PaddleFormers' own stage -> single-model names
    return {
        "rank": dist.get_rank(),
        "map": type(layer_map).__name__,
        "n_layers": layer_map.n_layers,
        "parameters": [
            {"name": name, "paddleformers_name": model._pp_to_single_mapping[name],
             "layer_id": layer_map.layer_id(name), "optimizer_ratio": optimizer_ratios[name]}
            for name, _ in model.named_parameters()
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out-dir", required=True)
    options = parser.parse_args()
    path = os.path.join(options.out_dir, f"rank{int(os.environ.get('PADDLE_TRAINER_ID', 0))}.json")
    try:
        init_pipeline()
        result = {"untied": describe(build_stage(tied=False)), "tied": describe(build_stage(tied=True))}
    except Exception:  # the test reads the failure from the file
        result = {"error": traceback.format_exc()}
    with open(path, "w") as file:
        json.dump(result, file, indent=1)


if __name__ == "__main__":
    sys.exit(main())
