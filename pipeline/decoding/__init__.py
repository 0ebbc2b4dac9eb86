"""The CPU decoding engine: shared-prefix batched generation, lockstep episodes, KV row caching,
and the trainer hook that samples GRPO groups with it.

A quarantined package: the only home-made decoding in the project, and the one place that
overrides a private TRL method for generation (``GRPOTrainer._generate_single_turn``, in
``trainer_sampling``). It is kept because the maintained alternatives measured far slower on the
2-core CPU path it serves: ``benchmarks/decode_cpu.py`` (RESULTS.md, "decode_cpu") put transformers'
continuous batching, which TRL's ``use_transformers_continuous_batching`` calls, at 8.1x the time
of this decoder for greedy evaluation and 9.0x for a GRPO group, against the issue's bar of 1.3x.
Training hooks it only for the ``cpu`` and ``tiny`` backends (GPU runs generate with TRL's own
path or vLLM); checkpoint evaluation (``pipeline.evaluation``) decodes with it. Rerun ``decode_cpu`` after a transformers or TRL upgrade: once
the library is within 1.3x, delete this package and the hook.
"""
