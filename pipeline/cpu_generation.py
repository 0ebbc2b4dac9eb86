"""GRPO's sampling on a CPU through ``pipeline.batch_generation`` instead of ``model.generate``.

A GRPO group is one prompt repeated G times. ``model.generate`` encodes that prompt G times, keeps
G copies of its KV cache and copies each of them once per query head at every sampled token; on a
2-core CPU that is most of a GRPO step (AML plan mode: ~360 ms per token for G=4). ``fast_sampling``
gives TRL's GRPOTrainer a generation step that encodes the shared prompt once and samples every
completion against that one copy (``batch_generation.generate`` with ``sampling_choice``). It takes
over only where it samples the same distribution as ``generate``: no vLLM, no images, and TRL's
sampling settings limited to temperature, top-k and top-p. Anything else goes to TRL unchanged.
"""

from __future__ import annotations

from typing import Any


def fast_sampling_applies(trainer: Any, multimodal_fields: Any, images: Any) -> bool:
    """Whether ``trainer``'s next generation can use the shared-prefix sampler."""
    return (
        not trainer.use_vllm
        and not getattr(trainer, "_is_vlm", False)
        and not images
        and not multimodal_fields
        and not trainer.min_p
        and trainer.repetition_penalty == 1.0
        and not (trainer.args.generation_kwargs or {})
    )


def fast_sampling_trainer(base: type) -> type:
    """A subclass of TRL's GRPOTrainer ``base`` that samples with the shared-prefix decoder."""
    import torch
    from trl.models import unwrap_model_for_generation

    from pipeline.batch_generation import generate, sampling_choice

    class SharedPrefixGRPOTrainer(base):  # type: ignore[misc, valid-type]
        """GRPOTrainer whose CPU sampling encodes each group's prompt once (module docstring)."""

        def _generate_single_turn(
            self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False
        ):
            if not fast_sampling_applies(self, multimodal_fields, images):
                return super()._generate_single_turn(
                    prompt_ids, images, multimodal_fields, num_generations, has_tool_images
                )
            if not hasattr(self, "_sampling_generator"):  # seeded, owned by this trainer
                self._sampling_generator = torch.Generator().manual_seed(self.args.seed)
            choose = sampling_choice(
                self._sampling_generator, self.temperature, self.top_k or 0, self.top_p
            )
            with unwrap_model_for_generation(
                self.model_wrapped, self.accelerator, generation_kwargs=self.generation_kwargs
            ) as model:
                completions = generate(
                    model,
                    prompt_ids,
                    self.max_completion_length,
                    set(self.eos_token_ids),
                    self._tokenizer.pad_token_id,
                    batch_size=len(prompt_ids),
                    choose=choose,
                    keep_stop=True,  # TRL trains the end-of-turn token of finished completions
                )
            return completions, None

    return SharedPrefixGRPOTrainer
