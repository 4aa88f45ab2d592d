"""Learned allocators and their fitting code: distilled gates, imitation students (BC / DAgger), PPO allocators and
routers, LinUCB. Studies that compare them live in :mod:`membudget.studies`."""

from .gates import BoostedGate, StaticGate, TemporalGate

__all__ = ["BoostedGate", "StaticGate", "TemporalGate"]
