"""Where the tests find the servers and the repository: one place for the URLs, the paths and
the interpreter that every folder of the suite uses.

PostgreSQL: $LOCKCONSOLE_TEST_PG_URL (default postgresql://postgres@127.0.0.1:5432/test).
MySQL/MariaDB: $LOCKCONSOLE_TEST_MYSQL_URL (default mysql://root@127.0.0.1:3306/test).
Under CI=true nothing that needs a server, a client or a tool may skip quietly.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PG_URL = os.environ.get("LOCKCONSOLE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
MYSQL_URL = os.environ.get("LOCKCONSOLE_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")
PYTHON = sys.executable

ROOT = Path(__file__).resolve().parents[2]  # the repository
TESTS = ROOT / "tests"
DATA = TESTS / "data"  # the suite's data files (bad configs, hostile strings, README claims)
# A folder for PYTHONPATH whose sitecustomize.py shifts the process's wall clock by
# $LOCKCONSOLE_TEST_CLOCK_SHIFT seconds (one lockconsole process with a clock of its own).
CLOCKSHIM = Path(__file__).resolve().parent / "clockshim"
