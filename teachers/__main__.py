"""``python -m membudget.teachers structure`` (structural results) and ``... labels --out F.npz`` (datasets)."""

import argparse
import time


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.teachers")
    sub = parser.add_subparsers(dest="command", required=True)
    st = sub.add_parser("structure", help="greedy Set F1, exact-cost DP headroom, load intervention")
    st.add_argument("--resamples", type=int, default=100_000, help="paired bootstrap resamples")
    lab = sub.add_parser("labels", help="build the imitation-label dataset (compressed npz)")
    lab.add_argument("--out", required=True, help="output .npz path")
    lab.add_argument("--first-seed", type=int, default=2000)
    lab.add_argument("--n-weeks", type=int, default=20)
    lab.add_argument("--budgets", nargs="+", default=["B5", "B10", "B15", "B20"])
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.command == "structure":
        from .structure import report

        print(report(args.resamples))
        print(f"\ncommand: python -m membudget.teachers structure   ({time.perf_counter() - start:.1f} s)")
    else:
        from .labels import build_label_dataset

        budgets = [int(b) if b.isdigit() else b for b in args.budgets]
        ds = build_label_dataset(range(args.first_seed, args.first_seed + args.n_weeks), budgets)
        ds.save(args.out)
        print(f"{args.out}: {len(ds)} rows from weeks {args.first_seed}-{args.first_seed + args.n_weeks - 1}, "
              f"budgets {ds.budget_names.tolist()}, {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
