"""The training run: config, model loading, the GRPO trainer and its warm start, Hub push."""
