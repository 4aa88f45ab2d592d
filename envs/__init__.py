"""Environments of membudget. Every id is registered in :mod:`membudget.envs.registration`."""
