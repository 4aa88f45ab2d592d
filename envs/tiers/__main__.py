"""``python -m membudget.envs.tiers results [flags]``: the BudgetMem results on TierRouting-v0
(:func:`membudget.agents.tier_router.main`)."""

import sys


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != "results":
        raise SystemExit("usage: python -m membudget.envs.tiers results [--quick] [--timesteps N] [--out DIR] "
                         "(see --help after 'results')")
    from membudget.agents.tier_router import main as results

    return results(argv[1:])


if __name__ == "__main__":
    main()
