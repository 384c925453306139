"""Which layer a parameter is in, and the ratio that follows: PaddleNLP's
:func:`layerwise_lr_decay` (:mod:`.layerwise`), :class:`LayerMap` and
:class:`PipelineLayerMap` (:mod:`.layer_maps`, reading names by the rules
of :mod:`.block_names`), parameter groups for any
optimizer (:mod:`.param_groups`), gradient norms per layer group
(:mod:`.grad_norms`) and the groups' names (:mod:`.group_names`).
``python -m paddle_llrd lr-table`` prints them (:mod:`paddle_llrd.cli.lr_table`).
"""
