"""The optimizers: :class:`AdamWDL`, its update paths, and the weights' EMA.

The class (:mod:`.adamwdl`) owns the parameters, the state and the public API;
the modules beside it hold what one step does.
"""
