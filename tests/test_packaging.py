"""What users install: the wheel holds every module of the tree (built from a copy of the checkout, as a fresh
clone would build it), the version has one source, and the registered ids, their Version Histories and
CHANGELOG.md agree."""

import importlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

import membudget
from membudget.envs import shared_budget
from membudget.envs.registration import ENTRY_POINTS, VARIANTS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOT_THE_PACKAGE = ("tests/", "docs/", ".ci/")
"""Folders of the repository that are not part of the installed package."""


def _checkout_files():
    """The files a fresh clone of this checkout would hold: tracked, plus new files git does not ignore."""
    if not os.path.isdir(os.path.join(ROOT, ".git")) or shutil.which("git") is None:
        pytest.skip("needs a git checkout")
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    return [f for f in out.stdout.split("\0") if f and os.path.exists(os.path.join(ROOT, f))]


def _tree_modules(files):
    """Every Python module of the package, as its path inside the wheel."""
    return {f"membudget/{f}" for f in files
            if f.endswith(".py") and not f.startswith(NOT_THE_PACKAGE)}


def _build_wheel(files, dst, unlist=None):
    """Build the wheel from a copy of ``files`` (with the package ``unlist`` taken out of pyproject.toml's package
    list); return the names it holds and its version."""
    src = dst / "src"
    for f in files:
        os.makedirs(src / os.path.dirname(f), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, f), src / f)
    if unlist:
        pyproject = (src / "pyproject.toml").read_text()
        assert f'"{unlist}", ' in pyproject
        (src / "pyproject.toml").write_text(pyproject.replace(f'"{unlist}", ', "", 1))
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                          "-w", str(dst / "dist"), str(src)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    (wheel,) = (dst / "dist").glob("membudget-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    return names, wheel.name.split("-")[1]


@pytest.fixture(scope="module")
def checkout():
    return _checkout_files()


def test_the_wheel_holds_every_module_of_the_tree_and_nothing_else(checkout, tmp_path):
    names, version = _build_wheel(checkout, tmp_path)
    modules = _tree_modules(checkout)
    shipped = {n for n in names if n.endswith(".py")}
    assert modules - shipped == set(), "left out of the wheel"
    assert shipped - modules == set(), "in the wheel but not in the tree"
    assert version == membudget.__version__
    # one namespaced package: nothing named envs/, agents/, tests/ ... lands in site-packages
    assert all(n.startswith(("membudget/", f"membudget-{version}.dist-info/")) for n in names), sorted(names)


def test_every_package_of_the_tree_is_in_the_package_list(checkout):
    """pyproject.toml's hand-kept list against the folders holding an ``__init__.py``: a new subpackage fails here
    before any wheel is built."""
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        listed = tomllib.load(f)["tool"]["setuptools"]["packages"]
    tree = {".".join(["membudget", *os.path.dirname(f).split("/")]).rstrip(".") for f in checkout
            if os.path.basename(f) == "__init__.py" and not f.startswith(NOT_THE_PACKAGE)}
    assert sorted(listed) == sorted(tree)


def test_a_package_left_out_of_the_build_is_caught(checkout, tmp_path):
    """The wheel check above, on a copy whose package list has lost envs/conversation (the way a package was once
    left out of a hand-kept list)."""
    names, _ = _build_wheel(checkout, tmp_path, unlist="membudget.envs.conversation")
    missing = _tree_modules(checkout) - {n for n in names if n.endswith(".py")}
    assert "membudget/envs/conversation/env.py" in missing


def test_the_version_has_one_source():
    assert importlib.metadata.version("membudget") == membudget.__version__
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        pyproject = f.read()
    project = re.search(r"^\[project\]\n(.*?)^\[", pyproject, re.M | re.S).group(1)
    assert re.search(r"^version\s*=", project, re.M) is None, "the version lives in membudget/__init__.py only"
    assert 'dynamic = ["version"]' in project
    assert 'version = { attr = "membudget.__version__" }' in pyproject


def _registered_versions():
    """``{id: (version, class docstring)}`` of every registered environment; variants share their base's history."""
    out = {}
    for env_id, (entry_point, _) in ENTRY_POINTS.items():
        module, name = ENTRY_POINTS[VARIANTS.get(env_id, env_id)][0].split(":")
        version = int(re.fullmatch(r"membudget/\w+-v(\d+)", env_id).group(1))
        out[env_id] = version, getattr(importlib.import_module(module), name).__doc__
    name = shared_budget.raw_env.metadata["name"]
    out["membudget.envs.shared_budget"] = int(re.fullmatch(r"\w+_v(\d+)", name).group(1)), shared_budget.raw_env.__doc__
    return out


@pytest.mark.parametrize("env_id", sorted(_registered_versions()))
def test_registered_ids_their_version_history_and_the_changelog_agree(env_id):
    version, doc = _registered_versions()[env_id]
    history = doc.split("## Version History", 1)[1]
    documented = [int(v) for v in re.findall(r"^\s*- v(\d+):", history, re.M)]
    if env_id not in VARIANTS:
        assert documented and max(documented) == version, (env_id, documented)
        assert sorted(documented) == list(range(version + 1)), "every version from v0 up is documented"
    with open(os.path.join(ROOT, "CHANGELOG.md")) as f:
        changelog = f.read()
    assert f"`{env_id}`" in changelog
    assert f"## [{membudget.__version__}]" in changelog or "## [Unreleased]" in changelog
