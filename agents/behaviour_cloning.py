"""Behaviour cloning of an SB3 policy's actor: the warm starts of the tier router and the ProactiveStream PPO."""

from __future__ import annotations


def behaviour_clone(model, observations, actions, *, epochs: int, batch_size: int, learning_rate: float, seed: int):
    """Fit the **actor** of the SB3 model ``model`` (``mlp_extractor.policy_net`` and ``action_net``) to ``actions``
    on ``observations``: cross-entropy of the actions under the policy, ``epochs`` passes of Adam over minibatches
    shuffled from ``seed``. The critic is left to PPO. Returns the share of ``observations`` on which the fitted
    policy's most likely action is the given one."""
    import torch

    policy = model.policy
    params = list(policy.mlp_extractor.policy_net.parameters()) + list(policy.action_net.parameters())
    optimiser = torch.optim.Adam(params, lr=learning_rate)
    x, y = torch.as_tensor(observations), torch.as_tensor(actions)
    generator = torch.Generator().manual_seed(int(seed))
    policy.set_training_mode(True)
    for _ in range(epochs):
        order = torch.randperm(len(x), generator=generator)
        for i in range(0, len(x), batch_size):
            b = order[i:i + batch_size]
            loss = -policy.get_distribution(x[b]).log_prob(y[b]).mean()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    policy.set_training_mode(False)
    with torch.no_grad():
        return float((policy.get_distribution(x).distribution.probs.argmax(-1) == y).float().mean())
