"""``python -m membudget.teachers labels --out F.npz``: the imitation-label dataset (the structural results are
``python -m membudget.evaluate structure``)."""

import argparse
import time

from .labels import build_label_dataset


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.teachers")
    sub = parser.add_subparsers(dest="command", required=True)
    lab = sub.add_parser("labels", help="build the imitation-label dataset (compressed npz)")
    lab.add_argument("--out", required=True, help="output .npz path")
    lab.add_argument("--first-seed", type=int, default=2000)
    lab.add_argument("--n-weeks", type=int, default=20)
    lab.add_argument("--budgets", nargs="+", default=["B5", "B10", "B15", "B20"])
    args = parser.parse_args(argv)
    start = time.perf_counter()
    budgets = [int(b) if b.isdigit() else b for b in args.budgets]
    ds = build_label_dataset(range(args.first_seed, args.first_seed + args.n_weeks), budgets)
    ds.save(args.out)
    print(f"{args.out}: {len(ds)} rows from weeks {args.first_seed}-{args.first_seed + args.n_weeks - 1}, "
          f"budgets {ds.budget_names.tolist()}, {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
