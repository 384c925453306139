"""STUB: replaced by the AdamWDL work (issue 3)."""
layerwise_lr_decay = None
