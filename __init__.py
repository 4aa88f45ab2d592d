"""membudget: Gymnasium and PettingZoo environments for budgeted memory decisions of LLM agents.

Importing the package registers every environment id (``membudget/PMWeek-v0``, ...).
"""

from membudget.envs.registration import register_envs

__version__ = "0.2.0.dev0"

register_envs()
