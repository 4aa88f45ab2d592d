"""The Python examples of the README and of the pages under docs/ run as printed (each in a fresh interpreter, from
outside the source tree), so that what a user reads first cannot drift from the API."""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
EXAMPLES = [(page.relative_to(ROOT).as_posix(), i + 1, code)
            for page in PAGES
            for i, code in enumerate(re.findall(r"^```python\n(.*?)^```", page.read_text(encoding="utf-8"),
                                                flags=re.M | re.S))]


def test_the_readme_has_an_example_per_environment_page():
    text = "\n".join(code for page, _, code in EXAMPLES if page == "README.md")
    for env_id in ("PMWeek-v0", "TierRouting-v0", "ReplayStream-v1", "ProactiveStream-v1", "ConversationPM-v1"):
        assert f'"membudget/{env_id}"' in text
    assert "shared_budget.parallel_env" in text


@pytest.mark.parametrize("page,number,code", EXAMPLES, ids=[f"{page}#{number}" for page, number, _ in EXAMPLES])
def test_example_runs(page, number, code, tmp_path):
    if re.search(r"^import ray\b", code, flags=re.M) and importlib.util.find_spec("tree") is None:
        pytest.skip("needs the ray extra and RLlib (the Ray suite, .ci/ray, runs RLlib's own test)")
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{page}, example {number} failed:\n{code}\n{done.stderr[-3000:]}"
