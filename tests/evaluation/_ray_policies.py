"""Policies the Ray tests send to their workers: by reference (``_ray_policies:angle_policy``) or as
objects Ray pickles. Those that report write to files, since they run in other processes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

# The directory the command-line tests' workers report to: set in the environment the test
# cluster was started with, which its workers inherit (a policy named on the command line takes
# no arguments).
REPORT_DIRECTORY = "RLMESH_GYM_RAY_TEST_DIR"


def push_towards_the_lean(obs: np.ndarray) -> np.ndarray:
    """CartPole-v1: push the cart the way the pole leans; episodes of 25 to 55 steps. Row by row,
    so a lane's actions do not depend on the batch it is in."""
    return (obs[:, 2] > 0).astype(np.int64)


def angle_policy():
    """``push_towards_the_lean``, named as ``_ray_policies:angle_policy`` (a factory)."""
    return push_towards_the_lean


def _worker_identity(first_observations: np.ndarray) -> str:
    """``pid|worker id|first observations``: the Ray worker running this (its id from Ray's
    runtime context) and the session's cold-reset observations, which name the shard: a shard that
    is run again starts from the same seeds."""
    import ray

    return f"{os.getpid()}|{ray.get_runtime_context().get_worker_id()}|{first_observations.tobytes().hex()}"


class Reporting:
    """``push_towards_the_lean``, slowed to ``delay`` seconds a step; after ``after`` vector
    steps it appends :func:`_worker_identity` to ``path``, once per run: a shard that Ray runs
    again after its worker was lost reports again."""

    def __init__(self, path: str, after: int, delay: float) -> None:
        self.path, self.after, self.delay = path, after, delay
        self.steps = 0
        self.first: np.ndarray | None = None

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        self.steps += 1
        if self.first is None:
            self.first = np.array(obs)
        if self.steps == self.after:
            with open(self.path, "a") as out:
                out.write(_worker_identity(self.first) + "\n")
        time.sleep(self.delay)
        return push_towards_the_lean(obs)


class Raising:
    """``push_towards_the_lean`` that raises on its ``after``-th vector step; its first step
    appends :func:`_worker_identity` to ``path`` (one line per run of the policy)."""

    def __init__(self, path: str, after: int) -> None:
        self.path, self.after = path, after
        self.steps = 0

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        self.steps += 1
        if self.steps == 1:
            with open(self.path, "a") as out:
                out.write(_worker_identity(obs) + "\n")
        if self.steps == self.after:
            raise RuntimeError(f"the policy broke on step {self.after}")
        return push_towards_the_lean(obs)


def slow_reporting_policy():
    """For the command line: :class:`Reporting` to ``$RLMESH_GYM_RAY_TEST_DIR/steps`` after 40
    steps, 10 ms a step (the test interrupts the run once a worker reported)."""
    return Reporting(str(Path(os.environ[REPORT_DIRECTORY]) / "steps"), after=40, delay=0.01)
