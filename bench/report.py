"""Every speed figure the README and docs/speed.md quote, from one run of each benchmark: ``python -m
membudget.bench.report`` runs each script of :data:`BENCHES` once, in its own process and one after another, keeps
its whole output, and writes docs/speed.md's generated part (the machine, the commit, a table of each script's
summary lines, the full outputs) and the README's Speed table from that same run (``--readme`` / ``--page`` name
the files; ``--only`` runs some of the scripts, for a look, and writes nothing unless asked).

Each script measures ratios against an anchor run in the same process (CartPole, MABWiser, the MILP, SB3), because
the machines are shared; the generated part records the load average before and after the run, so a reader can
tell a quiet run from a loaded one."""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import time

from membudget.studies.cli import plain

BENCHES = (
    ("PMWeek-v0 single env / CartPole-v1", ["membudget.bench.speed"]),
    ("PMWeek-v0 native vector env (1024 weeks) / CartPole vector env", ["membudget.bench.vector"]),
    ("ConversationPM-v1 / CartPole-v1", ["membudget.bench.conversation"]),
    ("ProactiveStream-v0 step / CartPole-v1; reset", ["membudget.bench.proactive", "--rounds", "5", "--seconds", "2"]),
    ("ProactiveStream-v1 step / CartPole-v1; reset",
     ["membudget.bench.proactive", "--env-version", "1", "--rounds", "5", "--seconds", "2"]),
    ("LinUCB select + update / MABWiser", ["membudget.bench.linucb", "--rounds", "7"]),
    ("HindsightDP, 5,400-week grid; vs MILP", ["membudget.bench.dp_grid"]),
    ("native PPO / SB3 PPO, same actor and settings", ["membudget.bench.ppo", "--rounds", "3"]),
    ("deployed students, one decision / CartPole-v1 step", ["membudget.bench.deployed"]),
    ("a command-line mistake refused (wall clock, CPU time)", ["membudget.bench.cli_errors", "--rounds", "3"]),
)
"""``(figure, python -m arguments)`` of every benchmark the README's Speed table quotes."""
SUMMARY = re.compile(r"target|median|ratio of|^CPU:", re.I)
"""The lines of a script's output that state its figures (the rest is per-round detail)."""
BEGIN, END = "<!-- bench:report:begin -->", "<!-- bench:report:end -->"
"""The markers of the generated part in docs/speed.md and around the README's Speed table."""


def machine() -> str:
    import torch

    from membudget.agents.ppo_compiled import native_bf16

    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 platform.processor()) if os.path.exists("/proc/cpuinfo") else platform.processor()
    return (f"{model}, {os.cpu_count()} cores; torch capability {torch.backends.cpu.get_cpu_capability()}, native "
            f"bf16 products {'yes' if native_bf16() else 'no'}; Python {platform.python_version()}, torch "
            f"{torch.__version__}")


def commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.abspath(__file__)))
    return out.stdout.strip() or "unknown"


def run(benches) -> list:
    """``[(figure, command, seconds, output)]``: each script run once, in its own process, in order."""
    out = []
    for figure, argv in benches:
        command = "python -m " + " ".join(argv)
        print(f"running {command}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True)
        text = done.stdout + (done.stderr if done.returncode else "")
        out.append((figure, command, time.perf_counter() - start, text))
        if done.returncode:
            print(f"{command} failed:\n{text}", file=sys.stderr)
    return out


def summary(text: str) -> list:
    return [line.strip() for line in text.splitlines() if SUMMARY.search(line)]


def page_part(results, header: str) -> str:
    lines = [BEGIN, "", header, "", "| figure | command | measured (the script's summary lines) |", "|---|---|---|"]
    for figure, command, _, text in results:
        cells = "<br>".join(s.replace("|", "\\|") for s in summary(text)) or "(no summary line: see the output)"
        lines.append(f"| {figure} | `{command}` | {cells} |")
    for figure, command, seconds, text in results:
        lines += ["", f"### `{command}` ({seconds:.0f} s)", "", "```", text.rstrip(), "```"]
    return "\n".join(lines + ["", END])


def readme_part(results, header: str) -> str:
    lines = [BEGIN, header, "", "| figure | command | measured |", "|---|---|---|"]
    for figure, command, _, text in results:
        cells = "; ".join(s for s in summary(text) if not s.startswith("CPU:")).replace("|", "\\|")
        lines.append(f"| {figure} | `{command}` | {cells} |")
    return "\n".join(lines + [END])


def replace_between(path: str, block: str) -> None:
    with open(path) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        raise ValueError(f"{path} has no {BEGIN} ... {END} markers to write between")
    head, rest = text.split(BEGIN, 1)
    with open(path, "w") as f:
        f.write(head + block + rest.split(END, 1)[1])


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.bench.report", description=plain(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--page", default=None, help="the page whose generated part to write (docs/speed.md)")
    parser.add_argument("--readme", default=None, help="the README whose Speed table to write (README.md)")
    parser.add_argument("--only", nargs="+", metavar="SCRIPT", help="run only these scripts (e.g. speed vector)")
    args = parser.parse_args(argv)
    benches = [b for b in BENCHES if not args.only or b[1][0].rsplit(".", 1)[1] in args.only]
    load = os.getloadavg()[0]
    results = run(benches)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = (f"One run of each script, {when}, commit {commit()}, by `python -m membudget.bench.report`; "
              f"{machine()}; load average {load:.1f} before and {os.getloadavg()[0]:.1f} after.")
    for figure, command, _, text in results:
        print(f"{figure}: {command}\n  " + "\n  ".join(summary(text)))
    if args.page:
        replace_between(args.page, page_part(results, header))
    if args.readme:
        replace_between(args.readme, readme_part(results, header))
    return results


if __name__ == "__main__":
    main()
