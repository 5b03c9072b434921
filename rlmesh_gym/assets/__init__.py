"""Package data: trained policy weights (see docs/pretrained.md)."""
