"""Studies: one module per paper study, each comparing the learned agents, baselines and teachers of the floors
below on held-out data, with the evaluation protocol's primitives in :mod:`membudget.studies.protocol` and the
training-run machinery in :mod:`membudget.studies.runs`.

- :mod:`~membudget.studies.budgetpm` — BudgetPM's headline table on PMWeek-v0 (the README's main job);
- :mod:`~membudget.studies.budgetpm_reproduction` — every BudgetPM finding re-measured;
- :mod:`~membudget.studies.rl_vs_distillation` — PPO against BC / DAgger from the hindsight DP;
- :mod:`~membudget.studies.limbo` — LIMBO on ReplayStream-v1 (and v0);
- :mod:`~membudget.studies.budgetmem` — BudgetMem's tier routers on TierRouting-v0;
- :mod:`~membudget.studies.proactmem` — ProactMem's memory layers on ProactiveStream-v1 (or v0);
- :mod:`~membudget.studies.shared_quota` — several assistants sharing one observation quota;
- :mod:`~membudget.studies.online_ceiling` — the online planner (posterior draws) between Sequential and the
  hindsight DP, and its students against the DP's;
- :mod:`~membudget.studies.history_students` — the online planner's students that see their history against those
  that read one observation;
- :mod:`~membudget.studies.imitation_gap` — students of the online planner against students of the hindsight DP at
  equal data, for a student of one observation and a learned-recurrence student.
"""
