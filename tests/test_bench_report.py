"""bench/report.py: the summary lines it keeps, and the generated parts it writes between the markers only."""

import pytest

from membudget.bench.report import BEGIN, END, page_part, readme_part, replace_between, summary

OUTPUT = """round  CartPole  PMWeek  ratio
    0   100,000  38,000  0.380
median ratio 0.383 (target >= 0.35: met)
CPU: torch capability AVX512, native bf16 products yes
"""
RESULTS = [("single env / CartPole", "python -m membudget.bench.speed", 12.0, OUTPUT)]


def test_the_summary_keeps_the_lines_that_state_figures():
    assert summary(OUTPUT) == ["median ratio 0.383 (target >= 0.35: met)",
                               "CPU: torch capability AVX512, native bf16 products yes"]


def test_the_generated_parts_replace_only_what_lies_between_the_markers(tmp_path):
    page = tmp_path / "speed.md"
    page.write_text(f"# Speed\n\nintro\n\n{BEGIN}\nold table\n{END}\n\n## Where the time goes\n")
    replace_between(str(page), page_part(RESULTS, "One run."))
    text = page.read_text()
    assert text.startswith("# Speed\n\nintro\n\n") and text.endswith("\n\n## Where the time goes\n")
    assert "old table" not in text and "median ratio 0.383 (target >= 0.35: met)" in text
    assert "### `python -m membudget.bench.speed` (12 s)" in text and "0   100,000  38,000  0.380" in text
    readme = tmp_path / "README.md"
    readme.write_text(f"## Speed\n{BEGIN}\nold\n{END}\n## Next\n")
    replace_between(str(readme), readme_part(RESULTS, "One run."))
    lines = readme.read_text().splitlines()
    assert "| single env / CartPole | `python -m membudget.bench.speed` | median ratio 0.383 (target >= 0.35: met) |" \
        in lines and lines[-1] == "## Next" and "CPU:" not in readme.read_text()
    (tmp_path / "bare.md").write_text("no markers")
    with pytest.raises(ValueError, match="no <!-- bench:report:begin -->"):
        replace_between(str(tmp_path / "bare.md"), "x")
