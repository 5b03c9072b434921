"""Evaluate a policy on an environment: reproducible, unbiased, one call.

>>> from rlmesh_gym.evaluation import evaluate
>>> result = evaluate("CartPole-v1", "pretrained:cartpole", episodes=8, num_envs=4, seed=0, progress=False)
>>> result.mean_return, result.episodes_per_lane
(500.0, (2, 2, 2, 2))
"""

from rlmesh_gym.evaluation._compare import ComparedEpisode, Comparison, PairedDifference, compare
from rlmesh_gym.evaluation._evaluate import (
    EvaluationError,
    EvaluationInterrupted,
    PolicyMismatchError,
    default_ids,
    evaluate,
    evaluate_async,
)
from rlmesh_gym.evaluation._options import EvaluationOptions
from rlmesh_gym.evaluation._quotas import EpisodeQuotas, lane_quotas
from rlmesh_gym.evaluation._result import EvalResult, EvalTimings, FleetServer
from rlmesh_gym.evaluation._statistics import (
    ConfidenceInterval,
    bootstrap_interval,
    interquartile_mean,
    probability_of_improvement,
)
from rlmesh_gym.evaluation.fleet import evaluate_fleet, evaluate_fleet_async, fleet_route_id
from rlmesh_gym.evaluation.ray_shards import RayCluster, evaluate_on_ray

__all__ = [
    "ComparedEpisode",
    "Comparison",
    "ConfidenceInterval",
    "EpisodeQuotas",
    "EvalResult",
    "EvalTimings",
    "EvaluationError",
    "EvaluationInterrupted",
    "EvaluationOptions",
    "FleetServer",
    "PairedDifference",
    "PolicyMismatchError",
    "RayCluster",
    "bootstrap_interval",
    "compare",
    "default_ids",
    "evaluate",
    "evaluate_async",
    "evaluate_fleet",
    "evaluate_fleet_async",
    "evaluate_on_ray",
    "fleet_route_id",
    "interquartile_mean",
    "lane_quotas",
    "probability_of_improvement",
]
