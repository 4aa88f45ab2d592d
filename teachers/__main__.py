"""``python -m membudget.teachers structure``: the structural results of the teachers on our world."""

import argparse
import time


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.teachers")
    sub = parser.add_subparsers(dest="command", required=True)
    st = sub.add_parser("structure", help="greedy Set F1, exact-cost DP headroom, load intervention")
    st.add_argument("--resamples", type=int, default=100_000, help="paired bootstrap resamples")
    args = parser.parse_args(argv)
    from .structure import report

    start = time.perf_counter()
    print(report(args.resamples))
    print(f"\ncommand: python -m membudget.teachers structure   ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
