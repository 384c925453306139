"""STUB: replaced by the AdamWDL work (issue 3)."""
AdamWDL = None
