"""Models of papers 001-004 (see ``base`` for the contract); the registry is ``MODELS``."""

from __future__ import annotations

from balancebench.models.base import Model, ModelPoint, ModelResult

__all__ = ["Model", "ModelPoint", "ModelResult"]
