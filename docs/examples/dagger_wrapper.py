"""DAgger on PMWeek-v0 against the HindsightTeacher wrapper alone (python docs/examples/dagger_wrapper.py [--quick])."""
import sys

import gymnasium as gym, numpy as np, torch
import membudget  # noqa: F401  (registers the ids)
from membudget.wrappers import HindsightTeacher

QUICK = "--quick" in sys.argv
TRAIN, ITERATIONS, EPOCHS = range(2000, 2002 if QUICK else 2040), 2 if QUICK else 4, 2 if QUICK else 60
TEST = [8000, 9000] if QUICK else list(range(8000, 8030)) + list(range(9000, 9030))
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(37, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                          torch.nn.Linear(64, 1))  # one network shared by the resources
feats = lambda o: torch.cat([torch.as_tensor(o["resources"]), torch.as_tensor(o["budget"]).expand(11, 9),
                             torch.as_tensor(o["mask"], dtype=torch.float32)[:, None]], 1)


def act(o):  # propose the candidates with p >= 0.5, scored by p
    with torch.no_grad():
        p = torch.sigmoid(net(feats(o))[:, 0]).numpy()
    return np.where((o["mask"] > 0) & (p >= 0.5), np.clip(p, 1e-6, 1), -1).astype(np.float32)


env, data = HindsightTeacher(gym.make("membudget/PMWeek-v0", budget="B10", action_mode="scores")), []
for it in range(ITERATIONS):  # iteration 0 follows the teacher (behaviour cloning); then the student acts
    for week in TRAIN:
        obs, info = env.reset(seed=week)
        done = False
        while not done:
            m = obs["mask"] > 0  # only candidates can be queried: only they enter the loss
            data.append((feats(obs)[m], torch.as_tensor(info["teacher_action"][m] > 0, dtype=torch.float32)))
            obs, _, done, _, info = env.step(info["teacher_action"] if it == 0 else act(obs))
    x, y = torch.cat([d[0] for d in data]), torch.cat([d[1] for d in data])
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    for _ in range(EPOCHS):
        for i in torch.randperm(len(y)).split(512):
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                net(x[i])[:, 0], y[i], pos_weight=(len(y) - y.sum()) / y.sum())
            opt.zero_grad(), loss.backward(), opt.step()
test_env, f1 = gym.make("membudget/PMWeek-v0", budget="B10", action_mode="scores"), []
for week in TEST:
    obs, _ = test_env.reset(seed=week)
    done = False
    while not done:
        obs, _, done, _, info = test_env.step(act(obs))
    f1.append(info["episode_metrics"]["set_f1"])
print(f"DAgger through the wrapper, B10, weeks 8000-8029 + 9000-9029: Set F1 {np.mean(f1):.4f}")
