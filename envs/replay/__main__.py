"""``python -m membudget.envs.replay results [flags]``: LIMBO's results table on ReplayStream-v0 (the same as
``python -m membudget.evaluate replay``, :func:`membudget.evaluate.replay_main`);
``python -m membudget.envs.replay select-alpha``: LinUCB's alpha chosen on development seeds 0-9
(:func:`membudget.agents.replay_runner.select_alpha`)."""

import sys


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["select-alpha"]:
        from membudget.agents.replay_runner import select_alpha

        best, scores = select_alpha()
        print("LinUCB alpha on development seeds 0-9, all six family x profile settings, 500-task streams")
        print(f"{'alpha':>6} {'mean reward':>12} {'accuracy':>9} {'tokens/task':>12}")
        for a, (r, acc, tok) in scores.items():
            print(f"{a:>6.2f} {r:>12.4f} {acc:>9.3f} {tok:>12.0f}" + ("  <- selected" if a == best else ""))
        return best
    if not argv or argv[0] != "results":
        raise SystemExit("usage: python -m membudget.envs.replay results [--families ...] [--profiles ...] "
                         "[--seeds ...] [--ppo-timesteps N] (see --help after 'results') | "
                         "python -m membudget.envs.replay select-alpha")
    from membudget.evaluate import replay_main

    return replay_main(argv[1:])


if __name__ == "__main__":
    main()
