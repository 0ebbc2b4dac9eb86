"""Small helpers shared by the support and ops environments (reply-quality checks)."""
