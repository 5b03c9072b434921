"""Train the CartPole-v1 policy shipped in rlmesh_gym/assets/cartpole_mlp.safetensors (PPO, CleanRL style).

Reads top to bottom: arguments, greedy evaluation, PPO (rollout, GAE, clipped update), final check, save.
Seeded and single-threaded, so a rerun with the same arguments on the same torch build reproduces the
same weights. Training stops early once the greedy (argmax) policy plays a full 500 steps on every
"check" seed; the saved policy is then evaluated on 100 fresh seeds and written only if its mean return
is >= --min-return.

    nice -n 10 python scripts/train_cartpole.py            # writes rlmesh_gym/assets/cartpole_mlp.safetensors
    python scripts/train_cartpole.py --out /tmp/cartpole.pt --seed 2
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import time
from collections import deque
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from safetensors.torch import save
from torch import nn
from torch.distributions import Categorical

from rlmesh_gym.policies.pretrained import MLPPolicy

ENV_ID = "CartPole-v1"
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "rlmesh_gym" / "assets" / "cartpole_mlp.safetensors"
HIDDEN = (64, 64)  # must match PRETRAINED["cartpole"] in rlmesh_gym/policies/pretrained.py


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=1, help="seed for torch and the training envs")
    p.add_argument("--total-timesteps", type=int, default=500_000, help="upper bound on env steps")
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--num-steps", type=int, default=128, help="rollout length per env per iteration")
    p.add_argument("--learning-rate", type=float, default=2.5e-4, help="linearly annealed to 0")
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--update-epochs", type=int, default=4)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--check-every", type=int, default=5, help="iterations between greedy checks")
    p.add_argument("--check-seed", type=int, default=1_000, help="greedy checks use seeds check_seed+k")
    p.add_argument("--check-episodes", type=int, default=20)
    p.add_argument("--eval-seed", type=int, default=10_000, help="final evaluation uses seeds eval_seed+k")
    p.add_argument("--eval-episodes", type=int, default=100)
    p.add_argument("--min-return", type=float, default=475.0, help="refuse to save below this mean")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the actor state_dict")
    args = p.parse_args()
    counts = ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs")
    for name in counts + ("check_every", "check_episodes", "eval_episodes"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.num_envs * args.num_steps < args.num_minibatches:
        p.error("--num-envs * --num-steps must be >= --num-minibatches")
    for name in ("gamma", "gae_lambda"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            p.error(f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(args, name)}")
    if args.learning_rate <= 0:
        p.error(f"--learning-rate must be > 0, got {args.learning_rate}")
    return args


def evaluate_greedy(actor: nn.Module, seeds: list[int], lanes: int = 20) -> np.ndarray:
    """Return the undiscounted return of one argmax-policy episode per seed (episode k uses seeds[k])."""
    returns = []
    for start in range(0, len(seeds), lanes):
        chunk = seeds[start : start + lanes]
        envs = gym.make_vec(ENV_ID, num_envs=len(chunk), vectorization_mode="sync")
        obs, _ = envs.reset(seed=chunk)
        total = np.zeros(len(chunk))
        running = np.ones(len(chunk), dtype=bool)
        while running.any():
            with torch.no_grad():
                action = actor(torch.as_tensor(obs, dtype=torch.float32)).argmax(dim=1).numpy()
            obs, reward, terminated, truncated, _ = envs.step(action)
            # A finished lane autoresets and keeps stepping; only its first episode counts.
            total += reward * running
            running &= ~(terminated | truncated)
        envs.close()
        returns.extend(total.tolist())
    return np.asarray(returns)


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias: float = 0.0) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer


if __name__ == "__main__":
    args = parse_args()
    torch.set_num_threads(1)  # the machine is shared; one core is plenty for a 4-64-64-2 MLP
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    batch_size = args.num_envs * args.num_steps
    num_iterations = max(1, args.total_timesteps // batch_size)
    check_seeds = [args.check_seed + k for k in range(args.check_episodes)]
    eval_seeds = [args.eval_seed + k for k in range(args.eval_episodes)]

    # ---- env and agent -------------------------------------------------------------------------
    # CartPole's native vector env autoresets in NEXT_STEP mode: the step after an episode ends only
    # resets that lane (reward 0, action ignored). Those steps are recorded but masked out below.
    envs = gym.make_vec(ENV_ID, num_envs=args.num_envs)
    obs_dim = envs.single_observation_space.shape[0]
    n_actions = int(envs.single_action_space.n)
    actor = MLPPolicy(obs_dim, n_actions, HIDDEN)
    linears = [m for m in actor.net if isinstance(m, nn.Linear)]
    for layer in linears[:-1]:
        layer_init(layer)
    layer_init(linears[-1], std=0.01)  # near-uniform initial policy
    critic = nn.Sequential(
        layer_init(nn.Linear(obs_dim, HIDDEN[0])), nn.Tanh(),
        layer_init(nn.Linear(HIDDEN[0], HIDDEN[1])), nn.Tanh(),
        layer_init(nn.Linear(HIDDEN[1], 1), std=1.0),
    )  # fmt: skip
    params = list(actor.parameters()) + list(critic.parameters())
    optimizer = torch.optim.Adam(params, lr=args.learning_rate, eps=1e-5)

    # ---- rollout storage -----------------------------------------------------------------------
    obs_buf = torch.zeros((args.num_steps, args.num_envs, obs_dim))
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long)
    logprobs = torch.zeros((args.num_steps, args.num_envs))
    rewards = torch.zeros((args.num_steps, args.num_envs))
    values = torch.zeros((args.num_steps, args.num_envs))
    terms = torch.zeros((args.num_steps, args.num_envs))  # 1 where the episode terminated at this step
    ends = torch.zeros((args.num_steps, args.num_envs))  # 1 where it terminated or was truncated
    valid = torch.zeros((args.num_steps, args.num_envs), dtype=torch.bool)  # False on autoreset steps

    next_obs = torch.as_tensor(envs.reset(seed=args.seed)[0], dtype=torch.float32)
    next_valid = torch.ones(args.num_envs, dtype=torch.bool)
    episode_return = np.zeros(args.num_envs)
    recent_returns: deque[float] = deque(maxlen=20)
    best_actor, best_check = copy.deepcopy(actor.state_dict()), -np.inf
    global_step = 0
    start_time = time.perf_counter()

    for iteration in range(1, num_iterations + 1):
        for group in optimizer.param_groups:
            group["lr"] = args.learning_rate * (1.0 - (iteration - 1) / num_iterations)

        # ---- collect a rollout -----------------------------------------------------------------
        for step in range(args.num_steps):
            global_step += args.num_envs
            obs_buf[step] = next_obs
            valid[step] = next_valid
            with torch.no_grad():
                dist = Categorical(logits=actor(next_obs))
                action = dist.sample()
                logprobs[step] = dist.log_prob(action)
                values[step] = critic(next_obs).squeeze(-1)
            actions[step] = action
            obs, reward, terminated, truncated, _ = envs.step(action.numpy())
            ended = terminated | truncated
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32)
            terms[step] = torch.as_tensor(terminated, dtype=torch.float32)
            ends[step] = torch.as_tensor(ended, dtype=torch.float32)
            episode_return += reward * next_valid.numpy()
            for lane in np.flatnonzero(ended):
                recent_returns.append(float(episode_return[lane]))
                episode_return[lane] = 0.0
            next_obs = torch.as_tensor(obs, dtype=torch.float32)
            next_valid = torch.as_tensor(~ended)

        # ---- generalized advantage estimation --------------------------------------------------
        # After an episode ends at step t, obs_buf[t + 1] holds that episode's final observation, so
        # values[t + 1] is exactly the bootstrap a truncated episode needs; terminations use zero.
        with torch.no_grad():
            next_value = critic(next_obs).squeeze(-1)
            advantages = torch.zeros_like(rewards)
            last_gae = torch.zeros(args.num_envs)
            for t in reversed(range(args.num_steps)):
                following = next_value if t == args.num_steps - 1 else values[t + 1]
                delta = rewards[t] + args.gamma * following * (1.0 - terms[t]) - values[t]
                last_gae = delta + args.gamma * args.gae_lambda * (1.0 - ends[t]) * last_gae
                advantages[t] = last_gae
            returns = advantages + values

        # ---- PPO update on the valid (non-autoreset) transitions --------------------------------
        keep = valid.reshape(-1)
        b_obs = obs_buf.reshape(-1, obs_dim)[keep]
        b_actions = actions.reshape(-1)[keep]
        b_logprobs = logprobs.reshape(-1)[keep]
        b_advantages = advantages.reshape(-1)[keep]
        b_returns = returns.reshape(-1)[keep]
        for _epoch in range(args.update_epochs):
            for mb in torch.randperm(len(b_obs)).chunk(args.num_minibatches):
                dist = Categorical(logits=actor(b_obs[mb]))
                ratio = (dist.log_prob(b_actions[mb]) - b_logprobs[mb]).exp()
                adv = b_advantages[mb]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef))
                v_loss = 0.5 * (critic(b_obs[mb]).squeeze(-1) - b_returns[mb]).pow(2).mean()
                loss = pg_loss.mean() - args.ent_coef * dist.entropy().mean() + args.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, args.max_grad_norm)
                optimizer.step()

        # ---- greedy check: keep the best argmax policy, stop once it is perfect on the check seeds
        if iteration % args.check_every == 0 or iteration == num_iterations:
            check = evaluate_greedy(actor, check_seeds)
            if check.mean() > best_check:
                best_check, best_actor = float(check.mean()), copy.deepcopy(actor.state_dict())
            train_mean = np.mean(recent_returns) if recent_returns else float("nan")
            sps = global_step / (time.perf_counter() - start_time)
            print(
                f"iter {iteration:4d}  step {global_step:7d}  train return (last 20) {train_mean:6.1f}  "
                f"greedy check mean {check.mean():6.1f} min {check.min():5.0f}  {sps:6.0f} steps/s",
                flush=True,
            )
            if check.min() >= 500.0:
                break
    envs.close()
    train_seconds = time.perf_counter() - start_time

    # ---- final evaluation on fresh seeds -------------------------------------------------------
    actor.load_state_dict(best_actor)
    actor.eval()
    final = evaluate_greedy(actor, eval_seeds)
    print(f"trained for {global_step} env steps in {train_seconds:.1f} s (best greedy check {best_check})")
    print(
        f"greedy evaluation over {len(final)} episodes (seeds {eval_seeds[0]}..{eval_seeds[-1]}): "
        f"mean {final.mean():.1f} ± {final.std():.1f}, min {final.min():.0f}, max {final.max():.0f}"
    )
    if final.mean() < args.min_return:
        raise SystemExit(
            f"not saving: mean return {final.mean():.1f} < --min-return {args.min_return}; "
            "try another --seed or more --total-timesteps"
        )

    # safetensors: plain tensors, no pickle, and loading it is not deprecated in any torch version.
    data = save({name: tensor.contiguous() for name, tensor in actor.state_dict().items()})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()[:16]
    print(f"wrote {args.out} ({len(data)} bytes, sha256 {digest})")
