"""Stable-Baselines3 model files (``.zip``) of ``PMWeek-v0`` read without running code from them.

An SB3 archive holds the policy's weights (``policy.pth``, ``policy.optimizer.pth``: loaded with torch's
``weights_only=True``, which never unpickles code) and a JSON ``data`` entry whose values are plain data or, for
anything JSON cannot hold (the policy class, the spaces, schedules, buffers), a base64 cloudpickle under
``":serialized:"`` beside a readable description (SB3's ``data_to_json``). Unpickling those runs whatever code the
file's author put there. :func:`load_sb3_model` therefore never unpickles them: it rebuilds every serialized entry
from membudget's own code and hands the rebuilt objects to SB3 as ``custom_objects`` (SB3 then takes them instead
of the file's pickles):

- ``policy_class``: the pickle is read as opcodes (``pickletools``, nothing executed) and must be a plain reference
  to one of :data:`POLICY_CLASSES`' classes by module and name; the algorithm (PPO or MaskablePPO) follows from it;
- ``observation_space`` / ``action_space``: PMWeek-v0's spaces for the default world's resources, the budget
  features' upper bounds (the budget the model was trained at) read from the file's description; the whole
  description must then equal that of the rebuilt spaces;
- ``clip_range`` / ``lr_schedule``: constant schedules whose value is read from the description;
- ``rollout_buffer_class``: the algorithm's default buffer (a reference to it, read as opcodes);
- the training state (``_last_obs``, ``_last_episode_starts``, ``_last_original_obs``, the episode info buffers):
  dropped (a further ``learn`` starts with a reset, as after SB3's own ``load`` with an environment).

Any other serialized entry is refused by name. ``trust_remote_code=True`` runs SB3's own full load (every pickle
unpickled) after the same checks of the archive's structure; use it only for files you trust.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import math
import os
import pickle
import pickletools
import re
import zipfile

import numpy as np

from membudget.envs.validation import check_int, check_number, reading_artefact

ENTRIES = ("data", "policy.pth", "policy.optimizer.pth")
"""Entries every SB3 PPO / MaskablePPO archive holds."""
MAX_MODEL_BYTES = 2**30
"""Largest model file read (membudget's own are about a megabyte)."""
MAX_DATA_BYTES = 16 * 2**20
"""Largest ``data`` entry read (membudget's own hold about 25 kB)."""
MAX_ROLLOUT = 2**20
"""Largest rollout buffer (``n_steps * n_envs`` transitions) a loaded model may allocate."""
TRAINING_STATE = ("_last_obs", "_last_episode_starts", "_last_original_obs", "ep_info_buffer", "ep_success_buffer")
"""Serialized entries of the training loop's state, dropped by the safe load."""
REBUILT = ("policy_class", "observation_space", "action_space", "clip_range", "lr_schedule", "rollout_buffer_class",
           *TRAINING_STATE)
"""The serialized entries the safe load rebuilds (or drops); any other is refused."""
EXCLUDED = ("policy", "device", "env", "replay_buffer", "rollout_buffer", "_vec_normalize_env", "_episode_storage",
            "_logger", "_custom_logger")
"""Attributes SB3 never saves (``_excluded_save_params``): a file that sets one is refused."""


def policy_classes() -> dict:
    """``{policy class: algorithm class}`` of the models ``python -m membudget.train`` saves (``ppo`` /
    ``maskable-ppo`` / ``ppo-conditioned``, ``--policy per-resource`` or ``mlp``)."""
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy
    from stable_baselines3 import PPO
    from stable_baselines3.common.policies import MultiInputActorCriticPolicy

    from membudget.agents.per_resource import MaskablePerResourceActorCriticPolicy, PerResourceActorCriticPolicy

    return {PerResourceActorCriticPolicy: PPO, MultiInputActorCriticPolicy: PPO,
            MaskablePerResourceActorCriticPolicy: MaskablePPO, MaskableMultiInputActorCriticPolicy: MaskablePPO}


def _name(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def class_reference(payload: bytes):
    """``(module, name)`` when the pickle ``payload`` is nothing but a reference to a global by name (how
    cloudpickle stores an importable class), else None. Read as opcodes: nothing is imported or run."""
    try:
        ops = [(op.name, arg) for op, arg, _ in pickletools.genops(payload)]
    except ValueError:
        return None
    body = [(name, arg) for name, arg in ops if name not in ("PROTO", "FRAME", "MEMOIZE", "PUT", "BINPUT")]
    kinds = [name for name, _ in body]
    if kinds in (["SHORT_BINUNICODE", "SHORT_BINUNICODE", "STACK_GLOBAL", "STOP"],
                 ["BINUNICODE", "BINUNICODE", "STACK_GLOBAL", "STOP"]):
        return body[0][1], body[1][1]
    if kinds == ["GLOBAL", "STOP"]:
        return tuple(body[0][1].split(" ", 1))
    return None


def _serialized(value) -> bool:
    return isinstance(value, dict) and ":serialized:" in value


def _payload(key, entry) -> bytes:
    try:
        return base64.b64decode(str(entry[":serialized:"]).encode(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"entry {key!r}: its ':serialized:' value is not base64") from None


def description(obj) -> dict:
    """The readable description SB3's ``data_to_json`` writes beside the pickle of ``obj`` (its type and its
    first-level attributes, as JSON values or strings)."""
    out = {":type:": str(type(obj))}
    for k, v in vars(obj).items():
        try:
            out[k] = json.loads(json.dumps(v))  # as read back from the file: tuples become lists
        except (TypeError, ValueError):
            out[k] = str(v)
    return out


def _check_described(key, entry, rebuilt) -> None:
    """The file's description of ``key`` must equal that of ``rebuilt`` (random generators' states aside)."""
    mine = description(rebuilt)
    differ = sorted(k for k in (set(mine) | set(entry)) - {":serialized:", "_np_random"}
                    if mine.get(k) != entry.get(k))
    if differ:
        def short(fields):
            return {k: str(fields.get(k))[:200] for k in differ}

        raise ValueError(f"entry {key!r} differs from membudget's rebuilt one in {differ}: the file says "
                         f"{short(entry)}, PMWeek-v0 has {short(mine)}")


def _referenced_class(key, entry, choices):
    """The class of ``choices`` the pickled reference of ``key`` names (by module and qualified name)."""
    ref = class_reference(_payload(key, entry))
    for cls in choices:
        if ref == (cls.__module__, cls.__qualname__):
            return cls
    named = "a pickle that is not a plain class reference" if ref is None else ".".join(ref)
    raise ValueError(f"entry {key!r} is {named}; membudget rebuilds only {[_name(c) for c in choices]}")


def _constant(key, entry) -> float:
    """The value of a constant schedule (SB3's ``FloatSchedule(ConstantSchedule(val=v))``) from its description."""
    from stable_baselines3.common.utils import FloatSchedule

    m = re.fullmatch(r"ConstantSchedule\(val=([-+0-9.eE]+|inf|nan)\)", str(entry.get("value_schedule", "")))
    value = float(m.group(1)) if m else math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"entry {key!r} is not a positive constant schedule (the file describes "
                         f"{entry.get('value_schedule')!r}): the safe load rebuilds constant schedules only")
    _check_described(key, entry, FloatSchedule(value))
    return value


def pmweek_spaces(budget_high=None):
    """PMWeek-v0's observation and action spaces (binary actions) for the default world; ``budget_high``: the
    budget features' upper bounds (they depend on the budget and the per-step cap; default: those of no budget
    and a per-step cap of 2)."""
    from gymnasium import spaces

    from membudget.envs.pm import WorldConfig
    from membudget.envs.pm.env import spaces_for

    obs, act = spaces_for(len(WorldConfig().resources), None, 1.0, 2, "binary")
    if budget_high is not None:
        obs = spaces.Dict({**obs.spaces, "budget": spaces.Box(obs["budget"].low, budget_high, dtype=np.float32)})
    return obs, act


def _budget_high(entry) -> np.ndarray:
    """The budget features' upper bounds from the description of a PMWeek-v0 observation space."""
    m = re.search(r"'budget': Box\(([^,()]*), ([^,()]*), \(9,\), float32\)", str(entry.get("spaces", "")))
    try:
        high = np.broadcast_to(np.array(m.group(2).strip("[] \n").split(), dtype=np.float32), (9,)) if m else None
    except ValueError:
        high = None
    if high is None or not np.all(np.isfinite(high)) or np.any(high < pmweek_spaces()[0]["budget"].low):
        raise ValueError(f"entry 'observation_space' is not PMWeek-v0's (a Dict with a 'budget' Box of 9 finite "
                         f"features): the file describes {str(entry.get('spaces'))[:300]!r}")
    return high.copy()


def check_spaces(observation_space, action_space) -> None:
    """``ValueError`` unless the spaces have PMWeek-v0's structure (keys, types, shapes; binary actions)."""
    want_obs, want_act = pmweek_spaces()
    got = getattr(observation_space, "spaces", None)
    if not isinstance(got, dict) or set(got) != set(want_obs.spaces) or any(
            type(got[k]) is not type(w) or got[k].shape != w.shape for k, w in want_obs.spaces.items()):
        raise ValueError(f"the observation space is {observation_space}, not PMWeek-v0's {want_obs}")
    if type(action_space) is not type(want_act) or action_space.shape != want_act.shape:
        raise ValueError(f"the action space is {action_space}, not PMWeek-v0's binary {want_act}")


def _check_policy_kwargs(policy, kwargs) -> None:
    from membudget.agents.per_resource import _PerResourceMixin, check_widths

    if not isinstance(kwargs, dict):
        raise ValueError(f"entry 'policy_kwargs' must be a mapping, got {kwargs!r}")
    per_resource = issubclass(policy, _PerResourceMixin)
    allowed = ("hidden", "context", "critic_arch") if per_resource else ("net_arch",)
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise ValueError(f"entry 'policy_kwargs' has keys {unknown} the safe load does not rebuild; known: "
                         f"{list(allowed)}")
    for key in ("hidden", "critic_arch"):
        if key in kwargs:
            check_widths(f"policy_kwargs[{key!r}]", kwargs[key])
    if "context" in kwargs and not isinstance(kwargs["context"], bool):
        raise ValueError(f"policy_kwargs['context'] must be a bool, got {kwargs['context']!r}")
    if "net_arch" in kwargs:
        arch = kwargs["net_arch"]
        for part in arch.values() if isinstance(arch, dict) and set(arch) <= {"pi", "vf"} else [arch]:
            check_widths("policy_kwargs['net_arch']", part)


def _check_plain(algo, policy, data) -> None:
    """The entries SB3 acts on at load: the algorithm's own (PPO's ``clip_range``, ``batch_size``, ...), the
    sizes of the rollout buffer it allocates, the learning rate and the policy's keyword arguments; no plain entry
    may replace a method or an attribute SB3 never saves."""
    missing = [k for k in ("learning_rate", "n_steps", "n_envs", "batch_size", "n_epochs", "clip_range")
               if k not in data]
    if missing:
        raise ValueError(f"the data entry lacks {missing}: not a {algo.__name__} model")
    for key, value in data.items():
        if not _serialized(value) and (key in EXCLUDED or hasattr(algo, key)):
            raise ValueError(f"entry {key!r} is not an attribute SB3 saves (it would replace "
                             f"{algo.__name__}.{key})")
    for key in ("n_steps", "n_envs", "batch_size", "n_epochs"):
        check_int(f"entry {key!r}", data[key], 1)
    if data["n_steps"] * data["n_envs"] > MAX_ROLLOUT:
        raise ValueError(f"entries 'n_steps' x 'n_envs' = {data['n_steps'] * data['n_envs']} transitions: the "
                         f"rollout buffer is limited to {MAX_ROLLOUT}")
    check_number("entry 'learning_rate'", data["learning_rate"], 0, low_open=True)
    _check_policy_kwargs(policy, data.get("policy_kwargs", {}))


def read_archive(path):
    """``(raw bytes, data entry as a dict, entry names)`` of an SB3 archive, checked for structure only:
    ``ValueError`` naming the file for anything that is not a readable SB3 archive."""
    size = os.path.getsize(path)
    if size > MAX_MODEL_BYTES:
        raise ValueError(f"{path}: {size} bytes; model files are limited to {MAX_MODEL_BYTES} bytes")
    with reading_artefact(path, "Stable-Baselines3 model"):
        with open(path, "rb") as f:
            raw = f.read()
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            names = z.namelist()
            missing = [n for n in ENTRIES if n not in names]
            if missing:
                raise ValueError(f"not a Stable-Baselines3 model: the archive lacks the entries {missing} (it "
                                 f"holds {names[:10]})")
            if z.getinfo("data").file_size > MAX_DATA_BYTES:
                raise ValueError(f"the data entry has {z.getinfo('data').file_size} bytes; at most "
                                 f"{MAX_DATA_BYTES} are read")
            bad = z.testzip()
            if bad is not None:
                raise ValueError(f"entry {bad!r} is corrupt (its checksum does not match)")
            text = z.read("data")
        try:
            data = json.loads(text)
        except RecursionError:
            raise ValueError("the data entry is JSON nested too deeply") from None
        if not isinstance(data, dict):
            raise ValueError(f"the data entry must be a JSON object, got {type(data).__name__}")
    return raw, data, names


def load_sb3_model(path, *, trust_remote_code: bool = False):
    """The PPO or MaskablePPO model of the archive ``path``, on the CPU, without unpickling anything (module
    docstring); ``trust_remote_code=True``: SB3's full load, which runs the file's pickles. Anything that is not
    a PMWeek-v0 model of ``python -m membudget.train`` (not a zip, truncated, missing entries, another algorithm
    or policy, other spaces, weights of another shape) raises ``ValueError`` naming the file."""
    raw, data, names = read_archive(path)
    with reading_artefact(path, "Stable-Baselines3 model"):
        if not _serialized(data.get("policy_class")):
            raise ValueError("the data entry has no serialized policy_class: not a Stable-Baselines3 model")
        classes = policy_classes()
        policy = _referenced_class("policy_class", data["policy_class"], classes)
        algo = classes[policy]
        _check_plain(algo, policy, data)
        custom = None
        if not trust_remote_code:
            custom = _rebuilt(algo, policy, data)
            _check_no_torch_variables(raw, names, algo)
        try:
            model = algo.load(io.BytesIO(raw), device="cpu", custom_objects=custom)
        except pickle.UnpicklingError as e:
            raise ValueError(_not_plain_tensors(_refused_weights(raw) or ("a .pth entry", e))) from None
        except (RuntimeError, ValueError, KeyError, AssertionError) as e:
            raise ValueError(f"the weights do not fit a {algo.__name__} {policy.__name__} on PMWeek-v0's spaces: "
                             f"{type(e).__name__}: {str(e)[:500]}") from None
        if trust_remote_code:
            check_spaces(model.observation_space, model.action_space)
    return model


def _check_no_torch_variables(raw, names, algo) -> None:
    """SB3 sets every tensor of ``pytorch_variables.pth`` on the model by the name the file gives it; PPO and
    MaskablePPO save none."""
    if "pytorch_variables.pth" not in names:
        return
    import torch

    with zipfile.ZipFile(io.BytesIO(raw)) as z, z.open("pytorch_variables.pth") as f:
        try:
            variables = torch.load(f, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as e:
            raise ValueError(_not_plain_tensors(("entry 'pytorch_variables.pth'", e))) from None
    if variables not in (None, {}):
        raise ValueError(f"entry 'pytorch_variables.pth' holds {sorted(variables)[:10]}; {algo.__name__} saves none")


def _refused_weights(raw):
    """``("entry 'NAME'", error)`` for the first ``.pth`` entry of the archive ``raw`` (in the order SB3 loads them)
    that ``torch.load(weights_only=True)`` refuses as not plain tensors, or None."""
    import torch

    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        for name in z.namelist():
            if os.path.splitext(name)[1] == ".pth":
                try:
                    torch.load(io.BytesIO(z.read(name)), map_location="cpu", weights_only=True)
                except pickle.UnpicklingError as e:
                    return f"entry {name!r}", e
                except Exception:  # another fault: not the entry SB3 refused as not plain tensors
                    continue
    return None


def _not_plain_tensors(refused) -> str:
    """The refusal of a ``.pth`` entry (``(its name, torch's UnpicklingError)``) with torch's reason: its message
    without the generic advice around it (weights_only's history, how to allowlist a global, where the documentation
    is), or the exception's type name when that leaves nothing."""
    what, error = refused
    plain = re.sub(r"\x1b\[[0-9;]*m", "", str(error))  # torch's message has terminal escapes for bold
    text = plain.partition("WeightsUnpickler error:")[2] if "WeightsUnpickler error:" in plain else plain
    text = re.split(r"Check the documentation|Please use `torch\.serialization", text)[0]
    generic = ("Weights only load failed", "(1)", "(2)", "Please file an issue")
    reason = " ".join(" ".join(line for line in text.splitlines() if not line.strip().startswith(generic)).split())
    reason = reason or " ".join(plain.split())
    detail = f"{type(error).__name__}: {reason[:300]}" if reason else type(error).__name__
    return f"{what} is not plain tensors (torch.load with weights_only=True refuses it: {detail})"


def _rebuilt(algo, policy, data) -> dict:
    """``custom_objects`` for every serialized entry of ``data`` (``policy``: the class ``policy_class`` names);
    ``ValueError`` naming an entry that cannot be rebuilt."""
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.buffers import MaskableDictRolloutBuffer
    from stable_baselines3.common.buffers import DictRolloutBuffer

    custom = {"policy_class": policy}
    for key in ("observation_space", "action_space", "clip_range"):
        if not _serialized(data.get(key)):
            raise ValueError(f"the data entry has no serialized {key}: not a {algo.__name__} model")
    obs_space, act_space = pmweek_spaces(_budget_high(data["observation_space"]))
    for key, rebuilt in (("observation_space", obs_space), ("action_space", act_space)):
        _check_described(key, data[key], rebuilt)
        custom[key] = rebuilt
    buffer = MaskableDictRolloutBuffer if algo is MaskablePPO else DictRolloutBuffer
    for key, entry in data.items():
        if key in custom or not _serialized(entry):
            continue
        if key in ("clip_range", "lr_schedule"):
            custom[key] = _constant(key, entry)
        elif key == "rollout_buffer_class":
            _referenced_class(key, entry, (buffer,))
            custom[key] = None  # SB3 then picks the algorithm's default, the buffer named
        elif key in TRAINING_STATE:
            custom[key] = None
        else:
            raise ValueError(f"entry {key!r} is pickled ({entry.get(':type:', 'of unknown type')}); the safe load "
                             f"rebuilds only {list(REBUILT)}. Load the file with trust_remote_code=True (python -m "
                             "membudget.evaluate --trust-model) only if you trust it: that runs its code")
    if "lr_schedule" in custom and custom["lr_schedule"] != data["learning_rate"]:
        raise ValueError(f"entry 'lr_schedule' is the constant {custom['lr_schedule']}, entry 'learning_rate' "
                         f"{data['learning_rate']}: a schedule the safe load does not rebuild")
    return custom


def model_file(path: str) -> str:
    """The model file ``path`` names: itself, or a run directory's ``model.zip`` / ``model.npz``;
    ``FileNotFoundError`` when there is none, ``ValueError`` when it is neither a ``.zip`` (SB3) nor a ``.npz``
    (imitation student). Checks the name only (nothing is read), so a command line can refuse a wrong path at once."""
    if os.path.isdir(path):
        for name in ("model.zip", "model.npz"):
            if os.path.exists(os.path.join(path, name)):
                return os.path.join(path, name)
        raise FileNotFoundError(f"{path} holds no model.zip or model.npz")
    if not os.path.exists(path):
        raise FileNotFoundError(f"no model at {path}")
    if not path.endswith((".zip", ".npz")):
        raise ValueError(f"unknown model format {path!r}: expected a .zip (SB3) or .npz (imitation student)")
    return path
