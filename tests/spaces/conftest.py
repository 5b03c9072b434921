"""Fixtures for the spaces tests; makes the shared helpers in ``tests/`` importable."""

from __future__ import annotations

import sys
from pathlib import Path

# tests/ holds helpers shared between test packages (e.g. _b3_peer.py); pytest only puts each
# test file's own directory on sys.path, so add the parent once.
_TESTS_DIR = str(Path(__file__).resolve().parents[1])
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)
