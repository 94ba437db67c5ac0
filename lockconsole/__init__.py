"""lockconsole: run a job scheduled on every instance exactly once, with database locks.

Public API: `run_once` (context manager and decorator), `serve_requests` (serve the fleet's
run requests from a Python app) and `__version__`. Importing this
package imports nothing heavy; the engine loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["run_once", "serve_requests", "__version__"]

if TYPE_CHECKING:
    from lockconsole.api import run_once
    from lockconsole.serving import serve_requests


def __getattr__(name: str) -> Any:
    if name == "run_once":
        from lockconsole.api import run_once

        return run_once
    if name == "serve_requests":
        from lockconsole.serving import serve_requests

        return serve_requests
    raise AttributeError(name)
