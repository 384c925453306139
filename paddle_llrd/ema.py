"""STUB: replaced by the EMA work (issue 5)."""
ExponentialMovingAverage = None
