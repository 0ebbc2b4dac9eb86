#!/usr/bin/env bash
# GPU smoke test: proves, on one CUDA machine, in a few minutes, that
#   1. Unsloth loads a 4-bit model with its vLLM engine (fast_inference) and generates,
#   2. TRL's own vLLM colocate path generates inside GRPO (transformers backend),
#   3. a few GRPO steps run through train_grpo.py with the A100 config (Unsloth 4-bit + LoRA),
# and prints step time and peak GPU memory for each run.
#   pip install -r requirements.txt -r requirements-gpu.txt
#   bash benchmarks/gpu_smoke.sh            # MODEL=... STEPS=... to change
# Needs the model weights on the Hub (or in HF_HOME); not run in CI (no GPU there).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
MODEL=${MODEL:-unsloth/Qwen2.5-1.5B-Instruct-bnb-4bit}
PLAIN_MODEL=${PLAIN_MODEL:-Qwen/Qwen2.5-0.5B-Instruct}
STEPS=${STEPS:-3}
OUT=${OUT:-outputs/gpu_smoke}
export TRL_EXPERIMENTAL_SILENCE=1
rm -rf "$OUT"; mkdir -p "$OUT"

echo "== GPU"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY - <<'PYEOF'
import torch, transformers, trl
assert torch.cuda.is_available(), "no CUDA device visible"
print(f"torch {torch.__version__} cuda {torch.version.cuda} | transformers {transformers.__version__} | trl {trl.__version__}")
PYEOF

echo "== 1. Unsloth 4-bit load + vLLM generation ($MODEL)"
MODEL="$MODEL" $PY - <<'PYEOF'
import os, time
import unsloth  # noqa: F401  (before transformers/trl)
import torch
from unsloth import FastLanguageModel
from vllm import SamplingParams

start = time.perf_counter()
model, tok = FastLanguageModel.from_pretrained(
    os.environ["MODEL"], max_seq_length=2048, load_in_4bit=True, fast_inference=True,
    gpu_memory_utilization=0.4,
)
print(f"loaded in {time.perf_counter() - start:.1f} s")
prompt = tok.apply_chat_template(
    [{"role": "user", "content": "Name two signs of money laundering."}],
    tokenize=False, add_generation_prompt=True,
)
start = time.perf_counter()
out = model.fast_generate([prompt] * 8, sampling_params=SamplingParams(max_tokens=64, temperature=1.0))
seconds = time.perf_counter() - start
tokens = sum(len(o.outputs[0].token_ids) for o in out)
print(f"vLLM generated {tokens} tokens in {seconds:.2f} s ({tokens / seconds:.0f} tok/s)")
print("sample:", out[0].outputs[0].text[:120].replace("\n", " "))
print(f"peak torch memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
PYEOF

report() {  # step time and peak memory of a finished run
  $PY - "$1" <<'PYEOF'
import csv, json, statistics, sys
from pathlib import Path
out = Path(sys.argv[1])
info = json.loads((out / "run_info.json").read_text())
rows = list(csv.DictReader(open(out / "log_history.csv")))
steps = [float(r["step_time"]) for r in rows if r.get("step_time")]
print(f"{out.name}: {info['global_step']} steps, median step {statistics.median(steps):.2f} s, "
      f"peak GPU memory {info.get('peak_gpu_memory_gb')} GiB, reward {rows[-2].get('reward')}")
PYEOF
}

echo "== 2. GRPO with TRL's vLLM colocate generation ($PLAIN_MODEL, transformers backend)"
$PY train_grpo.py --config configs/a100.yaml --output-dir "$OUT/trl_vllm" --max-steps "$STEPS" \
  --set model.backend=transformers --set model.name_or_path="$PLAIN_MODEL" \
  --set training.use_vllm=true --set training.vllm_mode=colocate \
  --set training.vllm_gpu_memory_utilization=0.3 --set training.optim=adamw_torch \
  --set data.n_train=32 --set training.max_completion_length=128 \
  --set training.save_strategy=no --set logging.log_completions=false
report "$OUT/trl_vllm"

echo "== 3. GRPO with the A100 config: Unsloth 4-bit + LoRA + vLLM ($MODEL)"
$PY train_grpo.py --config configs/a100.yaml --output-dir "$OUT/unsloth" --max-steps "$STEPS" \
  --set model.name_or_path="$MODEL" --set data.n_train=32 \
  --set training.max_completion_length=128 --set training.save_strategy=no \
  --set logging.log_completions=false
report "$OUT/unsloth"
echo "== GPU smoke test passed"
