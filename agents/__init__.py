"""Learned allocators: distilled gates (and, later, RL agents)."""

from .gates import BoostedGate, StaticGate, TemporalGate

__all__ = ["BoostedGate", "StaticGate", "TemporalGate"]
