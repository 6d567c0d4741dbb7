"""Observe: the run's metrics as an outside observer computes them (never visible to agents), collapse
spans, and attack attribution."""
