"""Pipeline parallel: each stage of PaddleFormers' ``LlamaForCausalLMPipe``
gives every parameter its global layer id and ratio.

``pipeline_worker.py`` runs on 2 CPU ranks (gloo) under
``python -m paddle.distributed.launch``, builds its stage of a 4-block
pipeline-parallel LLaMA (``pp_degree`` 2; PaddleFormers refuses
``pp_degree`` 1: ``AssertionError: Only support pipeline parallel, pp_size
must be greater than 1``), and reports the layer map the Trainer integration
resolves and the ratios AdamWDL's ``param_lr_table()`` shows. The expected
ratios are written out here from the names PaddleFormers' own
``_set_pipeline_name_mapping`` gives the stage's parameters in the single
model: embeddings ``d**(L+1)``, block ``i`` ``d**(L-i)``, final norm and
untied head ``1``; a tied embedding/head (``shared_layers...``) trains at
the embeddings' ratio on both stages, as the one tied weight of the single
model does.
"""
from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

import pytest

from launching import REPO_ROOT, gloo_env, rank_logs, run_in_own_session

WORKER = Path(__file__).resolve().parent / "pipeline_worker.py"
N_LAYERS = 4
DECAY = 0.5


def single_model_ratio(name: str) -> float:
    if name.startswith("model.embed_tokens."):
        return DECAY ** (N_LAYERS + 1)
    if name.startswith("model.layers."):
        return DECAY ** (N_LAYERS - int(name.split(".")[2]))
    assert name in ("model.norm.weight", "lm_head.weight"), name
    return 1.0


@pytest.fixture(scope="module")
def stages(tmp_path_factory):
    out = tmp_path_factory.mktemp("pipeline")
    log_dir = out / "log"
    command = [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", "2", "--max_restart", "0",
               "--job_id", f"llrd-pp-{uuid.uuid4().hex[:8]}", "--log_dir", str(log_dir),
               str(WORKER), "--out-dir", str(out)]
    env = {**gloo_env(), "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    proc = run_in_own_session(command, 300, log_dir, env)
    results = []
    for rank in (0, 1):
        path = out / f"rank{rank}.json"
        assert path.is_file(), proc.stdout[-3000:] + rank_logs(log_dir)
        result = json.loads(path.read_text())
        assert "error" not in result, result.get("error")
        results.append(result)
    assert proc.returncode == 0, proc.stdout[-3000:] + rank_logs(log_dir)
    return results


@pytest.mark.parametrize("head", ["untied", "tied"])
def test_every_stage_gives_global_layer_ids_and_ratios(stages, head):
    seen_blocks = []
    for rank, result in enumerate(stages):
        stage = result[head]
        assert stage["map"] == "PipelineLayerMap" and stage["n_layers"] == N_LAYERS
        for row in stage["parameters"]:
            if row["name"].startswith("shared_layers."):
                assert head == "tied"
                expected = DECAY ** (N_LAYERS + 1)  # the tied weight is the embeddings, on both stages
            else:
                expected = single_model_ratio(row["paddleformers_name"])
            assert row["optimizer_ratio"] == pytest.approx(expected, rel=1e-12), (rank, row)
            if row["paddleformers_name"].startswith("model.layers."):
                seen_blocks.append((rank, int(row["paddleformers_name"].split(".")[2])))
    # the blocks are split over the stages (so the last stage's ids are global ones, not 1 and 2)
    assert sorted(set(seen_blocks)) == [(0, 0), (0, 1), (1, 2), (1, 3)]


def test_the_tied_weight_is_on_both_stages(stages):
    shared = [[row for row in result["tied"]["parameters"] if row["name"].startswith("shared_layers.")]
              for result in stages]
    assert [len(rows) for rows in shared] == [1, 1]
    # PaddleFormers names the last stage's copy lm_head.weight; it keeps the embeddings' ratio
    assert [rows[0]["paddleformers_name"] for rows in shared] == ["model.embed_tokens.weight", "lm_head.weight"]
