"""The answer layer: a problem solved into a :class:`~adjoint.answer.prediction.Prediction`.

``solve`` runs every variant through the engine in the chosen answer mode, ``prediction``
holds the result (the contract's JSON, ``to_json``), ``effects`` says what a returning hook
changed against the same run with every hook only observing. It may import
:mod:`adjoint.derivation` and the layers below it; rendering is done above, by
:mod:`adjoint.render`.
"""
