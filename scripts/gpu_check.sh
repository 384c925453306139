#!/usr/bin/env bash
# GPU checks of paddle_llrd: tests/test_gpu.py (fused kernel float16/bfloat16
# master weights, auto_cast O1/O2 with GradScaler and an overflow step,
# multi-GPU data parallel and sharding, the multi-tensor step) plus the
# execution-mode, distributed, multi-tensor and EMA tests and the training-loop
# and EMA benchmarks, run against a CUDA build of Paddle; optionally (see
# PADDLEFORMERS_PYTHON) the PaddleFormers Trainer on a GPU,
# tests_paddleformers/test_gpu_trainer.py, and `python -m paddle_llrd train`
# in bf16 and with pipeline parallel on 2 GPUs, tests_paddleformers/test_gpu_cli.py. Prints a PASS/FAIL/SKIP line per
# suite and exits non-zero if any suite failed.
#
# Not part of CI (CI has no GPU): run it by hand on a CUDA machine,
#
#     scripts/gpu_check.sh                       # creates/reuses .venv-gpu
#     PYTHON=/path/to/python scripts/gpu_check.sh   # use an interpreter that already has paddlepaddle-gpu
#
# Environment:
#   PYTHON              an interpreter with a CUDA build of Paddle (skips the venv)
#   GPU_VENV            the virtualenv to create or reuse (default .venv-gpu)
#   PADDLE_GPU_VERSION  default 3.3.1, the version CI pins for the CPU build
#   PADDLE_CUDA_TAG     default cu126; cu118 and cu129 are the other CUDA builds
#   PADDLE_GPU_WHEEL    a paddlepaddle_gpu-*.whl file to install instead of the
#                       index (a machine that cannot reach Paddle's index)
#   PADDLEFORMERS_PYTHON  an interpreter with a CUDA Paddle and paddleformers
#                       (requirements-paddleformers.txt) for the GPU Trainer
#                       stage; default .venv-paddleformers-gpu/bin/python if it
#                       exists, else the stage is reported as SKIP. This script
#                       does not build that environment; one way:
#       python3 -m venv .venv-paddleformers-gpu
#       .venv-paddleformers-gpu/bin/pip install paddlepaddle-gpu==3.3.1 -i https://www.paddlepaddle.org.cn/packages/stable/cu126/
#       grep -v '^paddlepaddle' requirements-paddleformers.txt > /tmp/pf-gpu.txt
#       .venv-paddleformers-gpu/bin/pip install -r /tmp/pf-gpu.txt
#
# Where paddlepaddle-gpu comes from: PyPI's paddlepaddle-gpu stops at 2.6.2
# (`pip index versions paddlepaddle-gpu`), so Paddle 3 GPU wheels come from
# Paddle's own index, the command the READMEs, the docs and paddle_llrd's
# import error give (tests/test_readme.py keeps them equal):
#     python -m pip install paddlepaddle-gpu==3.3.1 -i https://www.paddlepaddle.org.cn/packages/stable/cu126/
# The package itself is installed with --no-deps, so pip never puts PyPI's CPU
# build of Paddle over the CUDA one.
set -uo pipefail
cd "$(dirname "$0")/.."

PADDLE_GPU_VERSION="${PADDLE_GPU_VERSION:-3.3.1}"
PADDLE_CUDA_TAG="${PADDLE_CUDA_TAG:-cu126}"
PADDLE_INDEX="https://www.paddlepaddle.org.cn/packages/stable/${PADDLE_CUDA_TAG}/"
GPU_VENV="${GPU_VENV:-.venv-gpu}"

has_cuda_paddle() {
    "$1" -c "import paddle, sys; sys.exit(0 if paddle.device.is_compiled_with_cuda() else 1)" >/dev/null 2>&1
}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_check: FAIL: no NVIDIA GPU visible (nvidia-smi -L failed); this script is for CUDA machines only."
    exit 2
fi
nvidia-smi -L

if [[ -n "${PYTHON:-}" ]]; then
    if ! has_cuda_paddle "$PYTHON"; then
        echo "gpu_check: FAIL: PYTHON=$PYTHON has no CUDA build of Paddle."
        exit 2
    fi
else
    PYTHON="$GPU_VENV/bin/python"
    if [[ -x "$PYTHON" ]] && has_cuda_paddle "$PYTHON"; then
        echo "gpu_check: reusing $GPU_VENV"
    else
        python3 -m venv "$GPU_VENV" || exit 2
        "$PYTHON" -m pip install -q --upgrade pip || exit 2
        if [[ -n "${PADDLE_GPU_WHEEL:-}" ]]; then
            echo "gpu_check: creating $GPU_VENV with $PADDLE_GPU_WHEEL"
            "$PYTHON" -m pip install -q "$PADDLE_GPU_WHEEL" || {
                echo "gpu_check: FAIL: could not install $PADDLE_GPU_WHEEL"
                exit 2
            }
        else
            echo "gpu_check: creating $GPU_VENV with paddlepaddle-gpu==$PADDLE_GPU_VERSION from $PADDLE_INDEX"
            "$PYTHON" -m pip install -q "paddlepaddle-gpu==$PADDLE_GPU_VERSION" -i "$PADDLE_INDEX" || {
                echo "gpu_check: FAIL: could not install paddlepaddle-gpu==$PADDLE_GPU_VERSION from $PADDLE_INDEX"
                echo "    (PyPI has no Paddle 3 GPU build; without access to that index, download the wheel"
                echo "    elsewhere and pass it as PADDLE_GPU_WHEEL=/path/to/paddlepaddle_gpu-*.whl)"
                exit 2
            }
        fi
    fi
    # The test tools at CI's pins, without CI's CPU Paddle; the package itself without its extras.
    grep -v '^paddlepaddle' requirements-dev.txt > "$GPU_VENV/requirements-gpu-check.txt"
    "$PYTHON" -m pip install -q -r "$GPU_VENV/requirements-gpu-check.txt" || exit 2
    "$PYTHON" -m pip install -q --no-deps -e . || exit 2
fi

"$PYTHON" -c "import paddle; print('paddle', paddle.__version__, 'CUDA', paddle.version.cuda(), \
'GPUs', paddle.device.cuda.device_count()); paddle.utils.run_check()" || {
    echo "gpu_check: FAIL: paddle.utils.run_check() failed"
    exit 2
}

declare -a SUMMARY=()
STATUS=0

# run_suite NAME INTERPRETER PATH: one pytest run, its PASS/FAIL line in SUMMARY.
run_suite() {
    local name="$1" python="$2" path="$3" log rc counts
    echo
    echo "=== $name ($path)"
    log="$(mktemp)"
    # -rs lists every skip with its reason: a skipped GPU test is not a pass.
    # The repository first on the path: the Trainer interpreter has no install of it.
    PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$python" -m pytest -q -rs -p no:cacheprovider "$path" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    counts="$(grep -E '^[0-9]+ (passed|failed|skipped|error)|^=+ .*(passed|failed|skipped|error)' "$log" | tail -1)"
    rm -f "$log"
    if [[ $rc -eq 0 ]]; then
        SUMMARY+=("PASS  $name  $counts")
    else
        SUMMARY+=("FAIL  $name  $counts (pytest exit $rc)")
        STATUS=1
    fi
}

run_suite gpu "$PYTHON" tests/test_gpu.py
run_suite execution-modes "$PYTHON" tests/test_execution_modes.py
run_suite distributed "$PYTHON" tests/test_distributed.py
# The multi-tensor step on CUDA tensors: every alias and bit-identity test.
# Its num_threads=1/2/3 cases check that the thread pool leaves CUDA banks
# alone (one kernel call per group, same bits): it splits CPU ranges only.
run_suite multi-tensor "$PYTHON" tests/optim/test_multi_tensor.py
# The pool's rules (thread count, bad values refused, exit with no thread
# left); device-independent, run here for a CUDA build's process too.
run_suite flat-threads "$PYTHON" tests/optim/test_flat_threads.py
# The EMA's flat update on CUDA tensors (coalesce_tensor's GPU kernel, shadows
# read in place from AdamWDL's buffers), against per-tensor bits (num_threads
# leaves CUDA segments whole, as above).
run_suite ema "$PYTHON" tests/optim/test_ema.py
run_suite ema-flat-update "$PYTHON" tests/optim/test_ema_flat_update.py

# Its speed on the GPU (step(); clear_grad() in a training loop, ratios to
# paddle.optimizer.AdamW in the same run): reported, never a pass/fail.
for bench in training_loop ema; do
    for regime in small-params bert-base; do
        echo
        echo "=== bench_$bench --regime $regime (on the GPU)"
        if PYTHONPATH="$PWD:$PWD/benchmarks${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" "benchmarks/bench_$bench.py" --regime "$regime"; then
            SUMMARY+=("INFO  bench-$bench-$regime  (ratios printed above)")
        else
            SUMMARY+=("FAIL  bench-$bench-$regime  (the benchmark did not run)")
            STATUS=1
        fi
    done
done

# Optional: the PaddleFormers Trainer in float16 with overflow steps (the EMA
# and the weight-decay schedule must advance only on applied steps).
TRAINER_PYTHON="${PADDLEFORMERS_PYTHON:-}"
if [[ -z "$TRAINER_PYTHON" && -x .venv-paddleformers-gpu/bin/python ]]; then
    TRAINER_PYTHON=.venv-paddleformers-gpu/bin/python
fi
if [[ -z "$TRAINER_PYTHON" ]]; then
    SUMMARY+=("SKIP  paddleformers-trainer  (no .venv-paddleformers-gpu and no PADDLEFORMERS_PYTHON)")
elif ! has_cuda_paddle "$TRAINER_PYTHON"; then
    SUMMARY+=("FAIL  paddleformers-trainer  ($TRAINER_PYTHON has no CUDA build of Paddle)")
    STATUS=1
elif ! "$TRAINER_PYTHON" -c "import paddleformers" >/dev/null 2>&1; then
    SUMMARY+=("FAIL  paddleformers-trainer  ($TRAINER_PYTHON cannot import paddleformers)")
    STATUS=1
else
    run_suite paddleformers-trainer "$TRAINER_PYTHON" tests_paddleformers/test_gpu_trainer.py
    # python -m paddle_llrd train: bf16 (the CLI's default) and pipeline parallel on 2 GPUs
    run_suite paddleformers-cli "$TRAINER_PYTHON" tests_paddleformers/test_gpu_cli.py
    run_suite paddleformers-pipeline-layer-map "$TRAINER_PYTHON" tests_paddleformers/test_pipeline_layer_map.py
fi

echo
echo "=== gpu_check summary"
printf '%s\n' "${SUMMARY[@]}"
if [[ $STATUS -eq 0 ]]; then
    echo "gpu_check: PASS"
else
    echo "gpu_check: FAIL"
fi
exit $STATUS
