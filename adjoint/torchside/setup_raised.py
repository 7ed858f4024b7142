"""A module's constructor that raised while the torch side built the model (``nn.Conv2d(3, 2, 1,
groups=2)``): the variant's answer is that error, ``during: setup``."""

from __future__ import annotations


class SetupRaised(Exception):
    """The constructor's exception, with the warnings constructors issued before it."""

    def __init__(self, exc: BaseException):
        super().__init__(str(exc))
        self.exc = exc
        self.warnings: list[dict] = []
