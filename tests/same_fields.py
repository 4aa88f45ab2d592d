"""Field-by-field equality of two dataclass instances (episodes, label sets), shared by the test modules."""

import dataclasses

import numpy as np


def assert_same_fields(a, b):
    """Every field equal; array fields also of the same dtype. The message names the first field that differs."""
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), f.name
        else:
            assert x == y, f.name
