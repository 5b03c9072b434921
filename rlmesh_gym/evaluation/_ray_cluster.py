"""Where a Ray evaluation runs: :class:`RayCluster`, and the connection to it for one run (a
``"local"`` cluster started on loopback and stopped after it, or a running cluster joined).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import ipaddress
import math
import os
import socket
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

__all__ = ["RayCluster", "connected", "import_ray", "is_client", "loopback_only"]

INSTALL_HINT = "pip install 'rlmesh-gym[ray]'"
_DEFAULT_CLIENT_PORT = 10001  # Ray Client's own default


def _check_address(address: Any) -> None:
    expected = "expected 'local', 'auto', 'ray://HOST:PORT' or a GCS address 'HOST:PORT'"
    if not isinstance(address, str) or not address.strip():
        raise TypeError(f"RayCluster.address must be a non-empty str ({expected}), got {address!r}")
    if address in ("local", "auto"):
        return
    scheme, separator, rest = address.partition("://")
    if separator and scheme != "ray":
        raise ValueError(f"unknown Ray address scheme {scheme + '://'!r} in {address!r}; {expected}")
    try:
        _host_port(address)
    except ValueError:
        raise ValueError(f"Ray address {address!r} is not a HOST:PORT address; {expected}") from None


def _host_port(address: str) -> tuple[str, int]:
    """The host and port of ``HOST:PORT`` or ``ray://HOST[:PORT]``; ``ValueError`` otherwise."""
    client = address.startswith("ray://")
    rest = address.removeprefix("ray://")
    host, colon, port = rest.rpartition(":")
    if client and (not colon or not port.isdigit()):
        host, port = rest, str(_DEFAULT_CLIENT_PORT)
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(address)
    return host, int(port)


def _check_number(
    name: str, value: Any, low: float, *, integer: bool = False, inclusive: bool = True
) -> None:
    kinds = (int,) if integer else (int, float)
    ok = (
        not isinstance(value, bool)
        and isinstance(value, kinds)
        and math.isfinite(value)
        and (value >= low if inclusive else value > low)
    )
    if not ok:
        what = "an int" if integer else "a number"
        bound = f">= {low:g}" if inclusive else f"> {low:g}"
        raise ValueError(f"RayCluster.{name} must be {what} {bound}, got {value!r}")


@dataclasses.dataclass(frozen=True, slots=True)
class RayCluster:
    """Where and how :func:`evaluate_on_ray` runs; checked on construction.

    Args:
        address: ``"local"`` (start a Ray cluster on this machine for the run, on loopback
            only, and stop it afterwards), ``"auto"`` (the running cluster: ``RAY_ADDRESS``, else
            the one ``ray start`` started here), a Ray Client address ``"ray://HOST:PORT"``, or a
            cluster's GCS address ``"HOST:PORT"``. A process already connected to Ray
            (``ray.init`` was called) evaluates on that connection and stays connected; it
            cannot start a ``"local"`` one. Connecting never stops a cluster, it disconnects.
        shards: how many Ray tasks share the lanes, each a contiguous slice (at most
            ``num_envs``).
        cpus_per_shard, gpus_per_shard: the Ray resources each task asks for;
            ``gpus_per_shard=None``: 1 when ``device`` is a CUDA device, else 0.
        max_retries: how often Ray runs a shard again whose worker or node was lost.
        stop_grace: seconds a stopped shard (Ctrl+C, another shard failed) gets to send its
            episodes before it is cancelled.
        connect_timeout: seconds to wait for the cluster's address to answer.
        imports: modules every worker imports before it builds the env (the CLI's
            ``--import``), so that the env ids they register are known there.
        num_cpus: the CPUs of a ``"local"`` cluster (``None``: every core of this machine).
        runtime_env: Ray's ``runtime_env`` of the run's workers (``working_dir``, ``pip``, ...);
            a ``"local"`` cluster also puts this process's ``sys.path`` on their ``PYTHONPATH``
            (unless ``runtime_env["env_vars"]`` sets one).

    Example:
        >>> RayCluster("auto", shards=4).shards
        4
    """

    address: str = "local"
    shards: int = 2
    cpus_per_shard: float = 1.0
    gpus_per_shard: float | None = None
    max_retries: int = 3
    stop_grace: float = 10.0
    connect_timeout: float = 10.0
    imports: Sequence[str] = ()
    num_cpus: int | None = None
    runtime_env: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        _check_address(self.address)
        _check_number("shards", self.shards, 1, integer=True)
        _check_number("cpus_per_shard", self.cpus_per_shard, 0)
        if self.gpus_per_shard is not None:
            _check_number("gpus_per_shard", self.gpus_per_shard, 0)
        _check_number("max_retries", self.max_retries, 0, integer=True)
        _check_number("stop_grace", self.stop_grace, 0, inclusive=False)
        _check_number("connect_timeout", self.connect_timeout, 0, inclusive=False)
        if isinstance(self.imports, str) or not all(isinstance(m, str) and m for m in self.imports):
            raise TypeError(f"RayCluster.imports must be a sequence of module names, got {self.imports!r}")
        object.__setattr__(self, "imports", tuple(self.imports))
        if self.num_cpus is not None:
            _check_number("num_cpus", self.num_cpus, 1, integer=True)
            if self.address != "local":
                raise ValueError(
                    f"RayCluster.num_cpus sizes a cluster started here (address='local'); the cluster at "
                    f"{self.address!r} has its own"
                )
        if self.runtime_env is not None:
            if not isinstance(self.runtime_env, Mapping):
                raise TypeError(f"RayCluster.runtime_env must be a mapping, got {self.runtime_env!r}")
            object.__setattr__(self, "runtime_env", dict(self.runtime_env))

    def gpus_for(self, device: str) -> float:
        """The GPUs one shard asks for when the policy runs on ``device``."""
        if self.gpus_per_shard is not None:
            return self.gpus_per_shard
        return 1.0 if device.startswith("cuda") else 0.0


def import_ray() -> Any:
    try:
        return importlib.import_module("ray")
    except ImportError as error:
        raise ImportError(f"evaluate_on_ray needs ray, which is not installed: {INSTALL_HINT}") from error


@contextlib.contextmanager
def loopback_only(ray: Any) -> Iterator[None]:
    """Ray on this machine's loopback interface only, for the block.

    Ray resolves ``127.0.0.1`` to the machine's network address, and binds its servers there,
    unless it believes multi-machine clusters are off (its macOS/Windows default, the
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` setting it reads at import): then every process it
    starts or connects to talks on ``127.0.0.1`` and its gRPC servers listen there only.
    """
    constants: Any = importlib.import_module("ray._private.ray_constants")
    previous = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    if previous is None:  # a Ray without the setting: nothing to change
        yield
        return
    constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        constants.ENABLE_RAY_CLUSTER = previous


def _user_paths() -> list[str]:
    """This process's ``sys.path`` without the interpreter's own directories (which every worker
    has): the directories a user's modules are found in."""
    own = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    paths = []
    for entry in sys.path:
        path = os.path.realpath(entry or os.getcwd())
        if any(path == p or path.startswith(p + os.sep) for p in own):
            continue
        if os.path.exists(path) and path not in paths:
            paths.append(path)
    return paths


def _local_runtime_env(given: Mapping[str, Any] | None) -> dict[str, Any]:
    runtime_env = dict(given or {})
    env_vars = dict(runtime_env.get("env_vars") or {})
    paths = _user_paths()
    if paths and "PYTHONPATH" not in env_vars:
        env_vars["PYTHONPATH"] = os.pathsep.join(paths)
    if env_vars:
        runtime_env["env_vars"] = env_vars
    return runtime_env


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name
        return False


def _found_address(address: str) -> str:
    """``address``, or for ``"auto"`` the running cluster's (as ``ray.init("auto")`` finds it)."""
    if address != "auto":
        return address
    services = importlib.import_module("ray._private.services")
    try:
        return str(services.get_ray_address_from_environment("auto", None))
    except ConnectionError as error:
        raise ConnectionError(
            "RayCluster(address='auto') found no running Ray cluster: start one with `ray start --head`, "
            f"set RAY_ADDRESS, or pass address='local' ({error})"
        ) from error


def _check_reachable(address: str, timeout: float) -> None:
    # ray.init retries an address nobody answers at for minutes; find out in `timeout` seconds.
    host, port = _host_port(address)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as error:
        raise ConnectionError(
            f"no Ray cluster answers at {address} within {timeout:g} s ({error}); check the address, "
            "or pass RayCluster(address='local') to start one here"
        ) from error


def is_client(ray: Any) -> bool:
    """Whether this process talks to Ray through Ray Client (``ray://``)."""
    client = importlib.import_module("ray.util.client")
    return bool(client.ray.is_connected())


# Ray (2.60) waits a fixed 30 s for a new node's raylet to register with its GCS, then raises a
# bare Exception saying so; a loaded machine has missed that (once in the suite's CI runs). A
# cluster started here is started once more before that failure is passed on.
_NODE_START_TIMED_OUT = "node timed out during startup"
_LOCAL_START_TRIES = 2


def _start_local(ray: Any, cluster: RayCluster) -> None:
    """``ray.init`` of a new cluster on this machine, tried again once if its node did not start."""
    for attempt in range(1, _LOCAL_START_TRIES + 1):
        try:
            ray.init(
                address="local",  # a new cluster, even with RAY_ADDRESS set
                num_cpus=cluster.num_cpus,
                include_dashboard=False,
                _node_ip_address="127.0.0.1",
                runtime_env=_local_runtime_env(cluster.runtime_env),
            )
            return
        except Exception as error:
            if _NODE_START_TIMED_OUT not in str(error) or attempt == _LOCAL_START_TRIES:
                raise
            ray.shutdown()
            warnings.warn(
                f"the local Ray cluster's node did not start in time ({error}); starting a new one",
                RuntimeWarning,
                stacklevel=4,
            )


@contextlib.contextmanager
def connected(cluster: RayCluster) -> Iterator[Any]:
    """``ray``, connected to ``cluster`` for the block; a cluster started here is stopped after it."""
    ray = import_ray()
    if ray.is_initialized():
        if cluster.address == "local":
            raise ValueError(
                "RayCluster(address='local') starts a Ray cluster, but this process is already connected "
                "to one (ray.init was called); pass address='auto' to evaluate on that connection"
            )
        yield ray  # the caller's connection, left as it is
        return
    if cluster.address == "local":
        with loopback_only(ray):
            _start_local(ray, cluster)
            try:
                yield ray
            finally:
                ray.shutdown()
        return
    address = _found_address(cluster.address)
    _check_reachable(address, cluster.connect_timeout)
    loopback = not address.startswith("ray://") and _is_loopback(_host_port(address)[0])
    with loopback_only(ray) if loopback else contextlib.nullcontext():
        ray.init(address=address, runtime_env=cluster.runtime_env)
        try:
            yield ray
        finally:
            ray.shutdown()  # a connection only: disconnects, the cluster runs on
