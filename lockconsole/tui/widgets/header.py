"""The dashboard's header line: which configuration file, which instance, which databases.

    header_text(config, instance) -> Text   "config /etc/lockconsole.toml · instance web-1 ·
                                             billing postgresql://app:***@db:5432/billing · …"

Every URL is its masked form (never a password); every part is data (shown literally).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from lockconsole.text.safe import shown

if TYPE_CHECKING:
    from lockconsole.config.loader import Config


def header_text(config: Config, instance: str | None) -> Text:
    """One line (the caller cuts it to the screen's width with '…')."""
    text = Text()
    path = config.path
    text.append("config ", style="")
    text.append(shown(path or "(none)"), style="bold")
    if instance:
        text.append(" · instance ", style="")
        text.append(shown(instance), style="bold")
    for name, database in config.databases.items():
        text.append(" · ", style="")
        text.append(shown(name), style="bold")
        text.append(" " + shown(database.url.masked))
    return text
