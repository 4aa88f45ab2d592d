"""The README's Python examples run as printed (each in a fresh interpreter, from outside the source tree), so that
the first page a user reads cannot drift from the API."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.M | re.S)


def test_the_readme_has_an_example_per_environment_page():
    text = "\n".join(BLOCKS)
    for env_id in ("PMWeek-v0", "TierRouting-v0", "ReplayStream-v1", "ProactiveStream-v1", "ConversationPM-v1"):
        assert f'"membudget/{env_id}"' in text
    assert "shared_budget.parallel_env" in text


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=[f"block{i + 1}" for i in range(len(BLOCKS))])
def test_readme_example_runs(index, tmp_path):
    script = tmp_path / f"readme_block_{index + 1}.py"
    script.write_text(BLOCKS[index], encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"README block {index + 1} failed:\n{BLOCKS[index]}\n{done.stderr[-3000:]}"
