"""Which layer a parameter is in, and the ratio that follows: PaddleNLP's
:func:`layerwise_lr_decay` (:mod:`.layerwise`), :class:`LayerMap`
(:mod:`.layer_maps`), parameter groups for any optimizer (:mod:`.param_groups`),
gradient norms per layer group (:mod:`.grad_norms`)
and the lr table (:mod:`.lr_table`, ``python -m paddle_llrd lr-table``).
"""
