"""rlmesh_gym: Gymnasium environments and PyTorch policies as rlmesh runtime peers.

The names below load on first use, so ``import rlmesh_gym`` stays cheap and pulls in
neither gymnasium nor torch until something needs them::

    from rlmesh_gym import evaluate

    result = evaluate("CartPole-v1", "pretrained:cartpole", episodes=10, num_envs=2, seed=0)

Subpackages: :mod:`rlmesh_gym.proto` (the wire schema), :mod:`rlmesh_gym.spaces` (specs and
the value codec), :mod:`rlmesh_gym.runtime` (the driver), :mod:`rlmesh_gym.envs`,
:mod:`rlmesh_gym.policies`, :mod:`rlmesh_gym.recording`, :mod:`rlmesh_gym.evaluation`,
:mod:`rlmesh_gym.serve` (gRPC), :mod:`rlmesh_gym.cli` (``rlmesh-gym``) and
:mod:`rlmesh_gym.assets` (the shipped policy's weights).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlmesh_gym import _lazy

__version__ = "0.1.0"

_EXPORTS = {
    "evaluate": "rlmesh_gym.evaluation",
    "compare": "rlmesh_gym.evaluation",
    "Comparison": "rlmesh_gym.evaluation",
    "evaluate_async": "rlmesh_gym.evaluation",
    "EvalResult": "rlmesh_gym.evaluation",
    "EvaluationError": "rlmesh_gym.evaluation",
    "EvaluationOptions": "rlmesh_gym.evaluation",
    "RecordingOptions": "rlmesh_gym.recording",
    "EpisodeRecord": "rlmesh_gym.recording",
    "GymVectorEnv": "rlmesh_gym.envs",
    "TorchPolicy": "rlmesh_gym.policies",
    "RandomPolicy": "rlmesh_gym.policies",
    "CallablePolicy": "rlmesh_gym.policies",
    "load_pretrained": "rlmesh_gym.policies",
    "RuntimeDriver": "rlmesh_gym.runtime",
    "RuntimeSessionSpec": "rlmesh_gym.runtime",
    "EpisodeRecorder": "rlmesh_gym.recording",
    "load_recording": "rlmesh_gym.recording",
    "replay_episode": "rlmesh_gym.recording",
    "space_spec": "rlmesh_gym.spaces",
}

__all__ = [
    "CallablePolicy",
    "Comparison",
    "EpisodeRecord",
    "EpisodeRecorder",
    "EvalResult",
    "EvaluationError",
    "EvaluationOptions",
    "GymVectorEnv",
    "RandomPolicy",
    "RecordingOptions",
    "RuntimeDriver",
    "RuntimeSessionSpec",
    "TorchPolicy",
    "__version__",
    "compare",
    "evaluate",
    "evaluate_async",
    "load_pretrained",
    "load_recording",
    "replay_episode",
    "space_spec",
]

if TYPE_CHECKING:
    from rlmesh_gym.envs import GymVectorEnv
    from rlmesh_gym.evaluation import (
        Comparison,
        EvalResult,
        EvaluationError,
        EvaluationOptions,
        compare,
        evaluate,
        evaluate_async,
    )
    from rlmesh_gym.policies import CallablePolicy, RandomPolicy, TorchPolicy, load_pretrained
    from rlmesh_gym.recording import EpisodeRecorder, RecordingOptions, load_recording, replay_episode
    from rlmesh_gym.recording.episode_record import EpisodeRecord
    from rlmesh_gym.runtime import RuntimeDriver, RuntimeSessionSpec
    from rlmesh_gym.spaces import space_spec


__getattr__, __dir__ = _lazy.lazy_exports(__name__, _EXPORTS)
