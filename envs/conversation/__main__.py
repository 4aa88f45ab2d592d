"""``python -m membudget.envs.conversation calibrate``: a conversation world's statistics beside their targets."""

import argparse

from ..validation import int_flag
from .calibration import WORLDS, report
from .levels import DEV_SEEDS


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.envs.conversation")
    sub = parser.add_subparsers(dest="command", required=True)
    cal = sub.add_parser("calibrate", help="measured world statistics beside the BudgetPM/GoodAI targets")
    cal.add_argument("--world", choices=sorted(WORLDS), default="v1",
                     help="ConversationPM-v1's world (default) or v0's")
    cal.add_argument("--first-seed", type=int_flag(0), default=DEV_SEEDS[0])
    cal.add_argument("--n-conversations", type=int_flag(1), default=len(DEV_SEEDS))
    args = parser.parse_args(argv)
    print(report(range(args.first_seed, args.first_seed + args.n_conversations), name=args.world))


if __name__ == "__main__":
    main()
