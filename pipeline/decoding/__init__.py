"""The CPU decoding engine: shared-prefix batched generation, lockstep episodes, KV row caching,
and the trainer hook that samples GRPO groups with it."""
