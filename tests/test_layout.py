"""The floors (envs → teachers → baselines → agents → studies → command lines) and no import loops, enforced
by the import-linter contracts in pyproject.toml; a planted violation of each contract breaks it."""

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE_DIRS = ("envs", "teachers", "baselines", "agents", "studies", "bench")


def _lint(cwd, pythonpath=None):
    exe = shutil.which("lint-imports", path=os.path.dirname(sys.executable)) or shutil.which("lint-imports")
    assert exe, "import-linter is part of the test extra (pip install -e '.[test]')"
    env = dict(os.environ, PYTHONPATH=pythonpath) if pythonpath else None
    return subprocess.run([exe, "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_contracts_are_kept():
    out = _lint(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 kept, 0 broken" in out.stdout


@pytest.fixture
def copy_of_package(tmp_path):
    """The package's Python files laid out as ``membudget/`` (as installed), with the contracts beside it."""
    dst = tmp_path / "membudget"
    shutil.copytree(ROOT, dst, ignore=lambda d, names: [n for n in names if n in (
        ".git", ".venv", "tests", "docs", "site", "runs", "build", "dist", "__pycache__", ".import_linter_cache") or (
        os.path.isfile(os.path.join(d, n)) and not n.endswith(".py"))])
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), tmp_path / "pyproject.toml")
    assert _lint(tmp_path, str(tmp_path)).returncode == 0
    return tmp_path


def _plant(root, path, line):
    with open(os.path.join(root, "membudget", path), "a") as f:
        f.write(f"\n{line}\n")


def test_an_import_up_a_floor_breaks_the_contract(copy_of_package):
    _plant(copy_of_package, "envs/validation.py", "import membudget.studies.protocol  # noqa")
    out = _lint(copy_of_package, str(copy_of_package))
    assert out.returncode != 0
    assert "membudget.envs is not allowed to import membudget.studies" in out.stdout


def test_an_import_loop_inside_a_floor_breaks_the_contract(copy_of_package):
    _plant(copy_of_package, "agents/linucb.py", "import membudget.agents.gates  # noqa")
    _plant(copy_of_package, "agents/gates.py", "import membudget.agents.linucb  # noqa")
    out = _lint(copy_of_package, str(copy_of_package))
    assert out.returncode != 0 and "No import loops" in out.stdout and "BROKEN" in out.stdout


def test_command_lines_are_thin():
    for name in ("train.py", "evaluate.py"):
        with open(os.path.join(ROOT, name)) as f:
            assert sum(1 for _ in f) <= 200, name


def _package_sources():
    """``(path, AST)`` of every module of the package (not the tests, docs or CI scripts)."""
    import ast

    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in (
            "tests", "docs", "build", "dist", "runs", "site", "__pycache__")]
        for name in filenames:
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                with open(path) as f:
                    yield os.path.relpath(path, ROOT), ast.parse(f.read())


# Public API despite the underscore: a named tuple's documented methods (the underscore keeps them apart from field
# names), torch.compile's documented shape markers, which live in torch._dynamo, and AOTInductor's documented entry
# points (aoti_compile_and_package, aoti_load_package), which live in torch._inductor.
PUBLIC_UNDERSCORED = {"_replace", "_asdict", "_fields", "_make", "torch._dynamo", "torch._inductor"}


def test_no_module_reads_another_object_s_private_attributes():
    """``x._name`` only on ``self`` / ``cls`` (and ``super()``): other objects are read through their public API."""
    import ast

    found = [f"{path}:{node.lineno} {ast.unparse(node)}" for path, tree in _package_sources()
             for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
             and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
             and not (isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "super")
             and node.attr not in PUBLIC_UNDERSCORED and ast.unparse(node) not in PUBLIC_UNDERSCORED]
    assert found == []
