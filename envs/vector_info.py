"""Vector-env infos in Gymnasium's batched form (what ``VectorEnv._add_info`` builds from sub-environment infos):
every key holds an array over the sub-environments (a nested dict stays a dict of such arrays) beside a boolean
mask ``_key`` of the sub-environments that have it."""

from __future__ import annotations

import numpy as np


def read_only(array: np.ndarray) -> np.ndarray:
    """``array`` marked read-only, so that one mask can stand for several keys: a write raises instead of changing
    the other keys' masks."""
    array.flags.writeable = False
    return array


def with_masks(values: dict, mask: np.ndarray) -> dict:
    """``values`` (arrays over the sub-environments, nested dicts allowed) with the mask ``_key`` beside each key;
    ``mask`` should be read-only (:func:`read_only`), as it is shared."""
    out = {}
    for key, value in values.items():
        out[key] = with_masks(value, mask) if isinstance(value, dict) else value
        out[f"_{key}"] = mask
    return out


def info_row(info: dict, i: int) -> dict:
    """Sub-environment ``i``'s info out of a batched ``info`` (the inverse of Gymnasium's batching): keys whose mask
    is False at ``i`` are left out, NumPy scalars become Python scalars, array rows are copied."""
    out = {}
    for key, value in info.items():
        if key.startswith("_"):
            continue
        mask = info.get(f"_{key}")
        if mask is not None and not mask[i]:
            continue
        if isinstance(value, dict):
            out[key] = info_row(value, i)
        else:
            v = value[i]
            out[key] = v.item() if isinstance(v, np.generic) else v.copy() if isinstance(v, np.ndarray) else v
    return out
