"""``SB3Policy``: a Stable-Baselines3 model (``PPO``, ``DQN``, ``SAC``, ...) as a ``RuntimeModel``."""

from __future__ import annotations

import io
import json
import time
import zipfile
from os import PathLike
from pathlib import Path
from typing import IO, Any

import numpy as np

from rlmesh_gym._regular_file import require_regular_file
from rlmesh_gym.policies._contract import ContractOrSpaces, PolicySpaces
from rlmesh_gym.policies._model import ActingPolicy
from rlmesh_gym.policies._trust import pickle_refusal
from rlmesh_gym.runtime.seams import ArrayPredictContext
from rlmesh_gym.spaces.kinds import describe_space

__all__ = ["SB3_INSTALL", "SB3Policy", "is_sb3_model", "is_sb3_zip"]

SB3_INSTALL = "pip install 'rlmesh-gym[sb3]' (or pip install stable-baselines3)"
# The algorithm class that loads a zip, by the module of the policy class saved in it. PPO and A2C
# share ActorCriticPolicy; prediction only uses the policy, so PPO loads both.
_ALGORITHMS = {
    "stable_baselines3.common.policies": "PPO",
    "stable_baselines3.dqn.policies": "DQN",
    "stable_baselines3.sac.policies": "SAC",
    "stable_baselines3.td3.policies": "TD3",
}
_DATA_LIMIT = 64 * 1024 * 1024  # the zip's JSON "data" record; larger is not a model.save() file


def _stable_baselines3() -> Any:
    try:
        import stable_baselines3
    except ModuleNotFoundError as error:
        raise ImportError(f"Stable-Baselines3 models need stable-baselines3: {SB3_INSTALL}") from error
    return stable_baselines3


def is_sb3_model(obj: object) -> bool:
    """Whether ``obj`` is a Stable-Baselines3 algorithm or policy (never imports SB3 to find out)."""
    import sys

    if "stable_baselines3" not in sys.modules:
        return False
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.policies import BasePolicy

    return isinstance(obj, (BaseAlgorithm, BasePolicy))


def is_sb3_zip(path: str | PathLike[str] | IO[bytes]) -> bool:
    """Whether ``path`` (a regular file or an open binary file) is a zip written by SB3's
    ``model.save()`` (``data`` and ``policy.pth`` records)."""
    if not zipfile.is_zipfile(path):
        return False
    try:
        with zipfile.ZipFile(path) as archive:
            return {"data", "policy.pth"} <= set(archive.namelist())
    except (zipfile.BadZipFile, OSError, EOFError):
        return False


def _data_record(path: Path, archive_bytes: bytes) -> dict[str, Any]:
    """The parsed JSON ``data`` record of the ``model.save()`` zip ``archive_bytes`` (read from ``path``)."""
    try:
        with zipfile.ZipFile(io.BytesIO(archive_bytes)) as archive:
            info = archive.getinfo("data")
            if info.file_size > _DATA_LIMIT:
                raise ValueError(f"{path}: a data record of {info.file_size} bytes: not from model.save()")
            raw = archive.read(info)
    except (zipfile.BadZipFile, KeyError, OSError, EOFError, NotImplementedError) as error:
        raise ValueError(f"{path}: not a readable model.save() zip: {error}") from error
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as error:
        raise ValueError(f"{path}: its data record is not JSON: not from model.save()") from error
    if not isinstance(data, dict):
        raise ValueError(f"{path}: its data record is not a JSON object: not from model.save()")
    return data


def _algorithm_of(path: Path, data: dict[str, Any]) -> Any:
    """The SB3 algorithm class that saved ``path`` (from the policy class recorded in its ``data``)."""
    sb3 = _stable_baselines3()
    policy_class = data.get("policy_class")
    module = policy_class.get("__module__") if isinstance(policy_class, dict) else None
    name = _ALGORITHMS.get(module) if isinstance(module, str) else None
    if name is None:
        raise ValueError(
            f"{path}: saved with the policy class of {module!r}, which names no Stable-Baselines3 algorithm "
            f"this loader knows ({', '.join(sorted(set(_ALGORITHMS.values())))}); load it yourself "
            "(model = ALGO.load(path)) and pass the model"
        )
    return getattr(sb3, name)


def _fits(model_space: Any, spec: Any) -> bool:
    """Whether the env's space (``spec``) is the model's, or the HWC image of a CHW-transposed model space."""
    from rlmesh_gym.spaces.spec import gym_space, space_spec

    try:
        if space_spec(model_space) == spec:
            return True
        env_space = gym_space(spec)
    except (TypeError, ValueError):
        return False
    from stable_baselines3.common.preprocessing import is_image_space

    # SB3 trains CNN policies on channel-first images and transposes channel-last ones itself.
    shape = getattr(env_space, "shape", None)
    return (
        is_image_space(env_space)
        and shape is not None
        and tuple(model_space.shape) == (shape[2], shape[0], shape[1])
        and model_space.dtype == env_space.dtype
    )


class SB3Policy(ActingPolicy[None]):
    """A Stable-Baselines3 algorithm (``PPO``, ``DQN``, ``SAC``, ...) or policy as a ``RuntimeModel``.

    Each predict is one ``model.predict(observations, deterministic=deterministic)`` on the whole
    batch, so SB3's own preprocessing (image scaling and transposition, one-hot Discrete
    observations, action unscaling and clipping) applies exactly as in SB3. VecNormalize statistics
    live outside the model: normalise in the env (a wrapper) if the model was trained with them.

    Args:
        model: a loaded SB3 algorithm (``PPO.load(path)``) or its ``.policy``.
        contract_or_spaces: the route's ``EnvContract`` or an ``(observation_spec, action_spec)``
            pair; the model's spaces must equal them (a channel-last image may stand for the
            channel-first space SB3 trained on). May be ``None`` and given later with :meth:`bind`.
        deterministic: SB3's deterministic actions (the greedy or mean action); ``False`` samples
            with SB3's (global torch) random state.

    Raises:
        ImportError: stable-baselines3 is not installed.
        TypeError: ``model`` is not an SB3 algorithm or policy.
        ValueError: (on bind) the model was trained on other spaces than the env's.
    """

    def __init__(
        self,
        model: Any,
        contract_or_spaces: ContractOrSpaces | None = None,
        *,
        deterministic: bool = True,
        component_id: str = "model",
    ) -> None:
        _stable_baselines3()
        if not is_sb3_model(model):
            raise TypeError(
                "SB3Policy: model must be a Stable-Baselines3 algorithm or policy, "
                f"got {type(model).__name__}"
            )
        if not isinstance(deterministic, bool):
            raise TypeError(f"SB3Policy: deterministic must be a bool, got {deterministic!r}")
        self.model = model
        self.deterministic = deterministic
        self.source = type(model).__name__
        super().__init__(contract_or_spaces, seed=None, component_id=component_id)

    @classmethod
    def load(
        cls,
        path: str | PathLike[str],
        contract_or_spaces: ContractOrSpaces | None = None,
        *,
        device: str = "cpu",
        allow_pickle: bool = False,
        **kwargs: Any,
    ) -> SB3Policy:
        """An ``SB3Policy`` around the model saved by ``model.save(path)`` (a ``.zip``).

        The algorithm (PPO, DQN, SAC, TD3) is told by the policy class saved in the zip. The zip
        is read as data: its pickled entries with an allow-list (spaces, SB3 policy classes and
        schedules, torch activations and optimizers), its weights with
        ``torch.load(weights_only=True)``. A zip that pickles anything else (e.g. a custom class
        or function in the spaces or ``policy_kwargs``) is refused unless ``allow_pickle`` is
        true, which loads it as ``ALGO.load(path)`` does: running code from the file.

        Raises:
            FileNotFoundError: ``path`` is not a file.
            ImportError: stable-baselines3 is not installed.
            ValueError: ``path`` is not a zip written by ``model.save()``, it pickles code and
                ``allow_pickle`` is false, or SB3 cannot load it.
        """
        file = Path(path)
        require_regular_file(file, "SB3Policy.load", "a zip from model.save()")
        archive_bytes = file.read_bytes()  # read once: what is checked is what SB3 loads
        if not is_sb3_zip(io.BytesIO(archive_bytes)):
            raise ValueError(
                f"SB3Policy.load: {file} is not a Stable-Baselines3 model.save() zip (no data and policy.pth)"
            )
        data = _data_record(file, archive_bytes)
        algorithm = _algorithm_of(file, data)
        custom_objects: dict[str, Any] | None = None
        if not allow_pickle:
            from rlmesh_gym.policies._sb3_data import UnsafeEntry, data_only_objects

            try:
                custom_objects = data_only_objects(data)
            except UnsafeEntry as error:
                raise ValueError(pickle_refusal(f"SB3Policy.load: {file}", str(error))) from None
            except ValueError as error:
                raise ValueError(f"SB3Policy.load: {file} is a broken model.save() zip: {error}") from error
        try:
            model = algorithm.load(io.BytesIO(archive_bytes), device=device, custom_objects=custom_objects)
        except Exception as error:  # SB3 reports unreadable parts with assorted exception types
            raise ValueError(
                f"SB3Policy.load: {algorithm.__name__}.load({str(file)!r}) failed: "
                f"{type(error).__name__}: {error}"
            ) from error
        policy = cls(model, None, **kwargs)
        policy.source = file.name
        if contract_or_spaces is not None:
            policy.bind(contract_or_spaces)
        return policy

    def _compile(self, spaces: PolicySpaces) -> None:
        for role, model_space, spec in (
            ("observation", self.model.observation_space, spaces.observation),
            ("action", self.model.action_space, spaces.action),
        ):
            if not _fits(model_space, spec):
                raise ValueError(
                    f"SB3 model {self.source} was trained on the {role} space {model_space}, but the env's "
                    f"{role} space is {describe_space(spec)}; evaluate it on the env it was trained on"
                )

    def _act(self, observations: Any, rows: int, context: ArrayPredictContext) -> tuple[Any, int]:
        # SB3 turns observations into tensors with torch.as_tensor, which warns on read-only arrays.
        if isinstance(observations, dict):
            observations = {key: np.array(value) for key, value in observations.items()}
        elif isinstance(observations, np.ndarray):
            observations = np.array(observations)
        start = time.perf_counter_ns()
        try:
            actions, _ = self.model.predict(observations, deterministic=self.deterministic)
        except Exception as error:
            raise self._fail(
                f"SB3 model {self.source} raised {type(error).__name__} in predict: {error}", error
            ) from error
        elapsed = time.perf_counter_ns() - start
        return self._check_actions(actions, rows, f"SB3 model {self.source}"), elapsed
