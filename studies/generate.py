"""Data generators on an execution backend: ``python -m membudget.evaluate labels --out F.npz [--backend ray]``
builds the imitation-label dataset of :func:`membudget.teachers.build_label_dataset` in week-chunk tasks (the
teachers' own ``python -m membudget.teachers labels`` is the same dataset in one process);
``python -m membudget.evaluate demonstrations --dataset-id ID [--backend ray]`` creates the Minari dataset of the
DP's demonstrations (:func:`membudget.teachers.minari_export.export_dp_demonstrations`) with one DP task per week
(the same dataset as ``python -m membudget.teachers export-minari``)."""

from __future__ import annotations

import argparse
import time

from membudget.envs.validation import int_flag, make_file_folder
from membudget.studies.cli import check_extras, optional_extras, user_input
from membudget.studies.execution import add_backend_flags, executor_from_flags
from membudget.studies.protocol import parse_budget
from membudget.teachers import build_label_dataset


def labels_main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.evaluate labels",
                                     description="the imitation-label dataset (compressed npz), in week chunks")
    parser.add_argument("--out", required=True, help="output .npz path")
    parser.add_argument("--first-seed", type=int_flag(0), default=2000)
    parser.add_argument("--n-weeks", type=int_flag(1), default=20)
    parser.add_argument("--budgets", nargs="+", default=["B5", "B10", "B15", "B20"])
    parser.add_argument("--chunk-weeks", type=int_flag(0), default=10, help="weeks per task (the dataset does not depend "
                                                                     "on it)")
    add_backend_flags(parser)
    args = parser.parse_args(argv)
    with user_input(parser.prog):  # before any work: the budgets, then the output path (it makes its folder)
        budgets = [parse_budget(b, none_ok=False) for b in args.budgets]  # a label needs a budget
        make_file_folder("--out", args.out)
    start = time.perf_counter()
    with executor_from_flags(args) as executor:
        ds = build_label_dataset(range(args.first_seed, args.first_seed + args.n_weeks), budgets, map=executor.map,
                                 chunk_weeks=args.chunk_weeks)
    ds.save(args.out)
    print(f"{args.out}: {len(ds)} rows from weeks {args.first_seed}-{args.first_seed + args.n_weeks - 1}, "
          f"budgets {ds.budget_names.tolist()}, {args.backend} backend, {time.perf_counter() - start:.1f} s")
    return ds


def demonstrations_main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.evaluate demonstrations",
                                     description="the hindsight DP's demonstrations as a Minari dataset (under "
                                                 "MINARI_DATASETS_PATH), one DP task per week")
    parser.add_argument("--dataset-id", required=True, help="e.g. membudget/pmweek-dp-B10-v0")
    parser.add_argument("--first-seed", type=int_flag(0), default=2000)
    parser.add_argument("--n-weeks", type=int_flag(1), default=20)
    parser.add_argument("--budget", default="B10", help="a level (B5...B80), an integer or none")
    add_backend_flags(parser)
    args = parser.parse_args(argv)
    with optional_extras(parser.prog):  # before any DP task runs
        check_extras(["minari"])
    with user_input(parser.prog):
        budget = parse_budget(args.budget)
    from membudget.teachers.minari_export import export_dp_demonstrations

    start = time.perf_counter()
    with executor_from_flags(args) as executor:
        ds = export_dp_demonstrations(args.dataset_id, range(args.first_seed, args.first_seed + args.n_weeks),
                                      budget=budget, map=executor.map)
    print(f"{args.dataset_id}: {ds.total_episodes} weeks, {ds.total_steps} steps, {args.backend} backend "
          f"({time.perf_counter() - start:.1f} s)")
    return ds
