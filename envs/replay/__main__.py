"""``python -m membudget.envs.replay results [flags]``: LIMBO's results table on ReplayStream-v0
(:func:`membudget.agents.replay_runner.main`)."""

import sys


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != "results":
        raise SystemExit("usage: python -m membudget.envs.replay results [--families ...] [--profiles ...] "
                         "[--seeds ...] [--ppo-timesteps N] (see --help after 'results')")
    from membudget.agents.replay_runner import main as results

    return results(argv[1:])


if __name__ == "__main__":
    main()
