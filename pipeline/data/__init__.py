"""Seeded episodes into GRPO datasets: plan, interactive and steps prompts, and their rendering."""
