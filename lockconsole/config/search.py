"""Where the configuration file is, by the search order (the first that exists wins):

1. --config PATH
2. $LOCKCONSOLE_CONFIG
3. ./lockconsole.toml
4. $XDG_CONFIG_HOME/lockconsole/config.toml (default ~/.config/lockconsole/config.toml)
5. /etc/lockconsole/config.toml (a system-wide file, as a package or a deploy puts it)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from lockconsole.model.errors import ConfigError

SEARCH_ORDER_HELP = (
    "--config PATH, $LOCKCONSOLE_CONFIG, ./lockconsole.toml, "
    "$XDG_CONFIG_HOME/lockconsole/config.toml, /etc/lockconsole/config.toml"
)
SYSTEM_CONFIG = Path("/etc/lockconsole/config.toml")


def find_config(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """The config file to use, by the search order above."""
    env = os.environ if environ is None else environ
    if explicit:
        path = Path(explicit)
        if path.is_dir():
            raise ConfigError(f"--config {explicit} is a directory, not a file")
        if not path.is_file():
            raise ConfigError(f"config file not found: {explicit} (given with --config)")
        return path
    if env.get("LOCKCONSOLE_CONFIG"):
        path = Path(env["LOCKCONSOLE_CONFIG"])
        if not path.is_file():
            what = "a directory" if path.is_dir() else "a missing file"
            raise ConfigError(f"$LOCKCONSOLE_CONFIG points at {what}: {path}")
        return path
    candidates = [Path("lockconsole.toml")]
    xdg = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    candidates.append(Path(xdg) / "lockconsole" / "config.toml")
    candidates.append(Path(env.get("LOCKCONSOLE_SYSTEM_CONFIG") or SYSTEM_CONFIG))
    for path in candidates:
        if path.is_file():
            return path
    raise ConfigError(
        f"no configuration found (looked for {SEARCH_ORDER_HELP}); "
        "`lockconsole init` writes a starter file"
    )
