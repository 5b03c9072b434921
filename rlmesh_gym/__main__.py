"""``python -m rlmesh_gym`` runs the ``rlmesh-gym`` command line."""

from rlmesh_gym.cli import main

raise SystemExit(main())
