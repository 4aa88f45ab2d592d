"""``python -m membudget.teachers labels --out F.npz``: the imitation-label dataset;
``python -m membudget.teachers export-minari --dataset-id ID``: the DP's demonstrations as a Minari dataset (the
structural results are ``python -m membudget.evaluate structure``)."""

import argparse
import time

from membudget.envs.pm.levels import parse_budget
from membudget.envs.validation import check_extras, int_flag, make_file_folder, missing_extra

from .labels import build_label_dataset


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.teachers")
    sub = parser.add_subparsers(dest="command", required=True)
    lab = sub.add_parser("labels", help="build the imitation-label dataset (compressed npz)")
    lab.add_argument("--out", required=True, help="output .npz path")
    lab.add_argument("--first-seed", type=int_flag(0), default=2000)
    lab.add_argument("--n-weeks", type=int_flag(1), default=20)
    lab.add_argument("--budgets", nargs="+", default=["B5", "B10", "B15", "B20"])
    mx = sub.add_parser("export-minari", help="the hindsight DP's demonstrations as a Minari dataset")
    mx.add_argument("--dataset-id", required=True, help="e.g. membudget/pmweek-dp-B10-v0")
    mx.add_argument("--first-seed", type=int_flag(0), default=2000)
    mx.add_argument("--n-weeks", type=int_flag(1), default=20)
    mx.add_argument("--budget", default="B10", help="a level (B5...B80), an integer or none")
    args = parser.parse_args(argv)
    # every mistake is one line and exit status 2 before any work: budgets, the output path, a missing extra
    command = {"labels": lab, "export-minari": mx}[args.command]
    try:
        if args.command == "export-minari":
            check_extras(["minari"])
            budget = parse_budget(args.budget)
        else:
            budgets = [parse_budget(b, none_ok=False) for b in args.budgets]  # a label needs a budget
            make_file_folder("--out", args.out)  # last: it makes the output's folder
    except ValueError as e:
        command.error(str(e))
    except ModuleNotFoundError as e:
        command.error(missing_extra(e) or str(e))
    start = time.perf_counter()
    if args.command == "export-minari":
        from .minari_export import export_dp_demonstrations

        ds = export_dp_demonstrations(args.dataset_id, range(args.first_seed, args.first_seed + args.n_weeks),
                                      budget=budget)
        print(f"{args.dataset_id}: {ds.total_episodes} weeks, {ds.total_steps} steps "
              f"({time.perf_counter() - start:.1f} s)")
        return ds
    ds = build_label_dataset(range(args.first_seed, args.first_seed + args.n_weeks), budgets)
    ds.save(args.out)
    print(f"{args.out}: {len(ds)} rows from weeks {args.first_seed}-{args.first_seed + args.n_weeks - 1}, "
          f"budgets {ds.budget_names.tolist()}, {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
