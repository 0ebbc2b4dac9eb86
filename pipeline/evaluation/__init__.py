"""Scoring policies: whole episodes, held-out decision cuts, model-backed policies, statistics."""
