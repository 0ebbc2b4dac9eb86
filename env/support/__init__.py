"""Support-ticket resolution: refunds, duplicate charges, takeovers, shipping, abuse, tier 2."""
