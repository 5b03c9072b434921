"""``python -m rlmesh_gym`` runs the ``rlmesh-gym`` command line."""

import sys

try:
    from rlmesh_gym.cli import main
except KeyboardInterrupt:  # Ctrl+C while the command line is still loading: as main() reports it
    print("rlmesh-gym: error: interrupted", file=sys.stderr)
    raise SystemExit(130) from None

raise SystemExit(main())
