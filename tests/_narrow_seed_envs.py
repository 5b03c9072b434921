"""Registers MinAtar's ids and dm_control's (through shimmy) for ``_narrow_seed_envs:EnvId``.

Both seed numpy's ``RandomState``, which takes only 32-bit seeds. MinAtar's package registers
its ids through an entry point gymnasium no longer reads, so they are registered here.
"""

from __future__ import annotations

import gymnasium

try:
    import minatar.gym
    import shimmy  # noqa: F401  (registers dm_control/...)
except ImportError:  # the lean venvs of make test-pythons; test_narrow_seeds.py skips there
    pass
else:
    if "MinAtar/Breakout-v1" not in gymnasium.registry:
        minatar.gym.register_envs()
