"""Numba compilation shared by the package's kernels."""

from __future__ import annotations

import functools

import numba

njit_leaf = functools.partial(numba.njit, cache=True, _nrt=False)
"""``@njit_leaf`` (or ``@njit_leaf(error_model=...)``): compiles a helper that allocates no array without numba's
reference counting (``_nrt=False``; numba refuses to compile one that allocates, or that calls a function that needs
the counting). Every array a compiled function receives, or unpacks from a tuple, otherwise costs an atomic
increment and decrement of its count. In the innermost loops of the posterior samplers those took about half the
PMWeek online planner's time (``perf``: ``NRT_incref`` / ``NRT_decref``; docs/online_teacher.md), and a tenth of
the PMWeek vector environment's step where each week's observation was written by an inlined helper. Results are
unchanged: only the counting goes."""

njit_kernel = functools.partial(numba.njit, cache=True, error_model="numpy")
"""``@njit_kernel`` (or ``@njit_kernel(inline=...)``): compiles a kernel without numba's zero check before each
division (``error_model="numpy"``: a division by zero would give inf or nan instead of raising). The online
planner's kernels (``teachers.posterior``, ``teachers.hindsight_dp``) divide by nothing that can be zero on the
paths the package runs, where the checks cost 5-10% of their time; their results are the same bits."""
