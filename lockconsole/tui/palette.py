"""The command palette offers every console action the current mode allows."""

from __future__ import annotations

from functools import partial
from typing import Any

from textual.command import DiscoveryHit, Hit, Hits, Provider

from lockconsole.tui.bindings import ACTIONS, DASHBOARD, MUTATING, ConsoleAction


class ActionsProvider(Provider):
    """Console actions by name: the dashboard's when the palette was opened over it, never
    trigger or release in --read-only mode."""

    def _allowed(self) -> list[ConsoleAction]:
        app: Any = self.app
        on_dashboard = self.screen is app.screen_stack[0]
        read_only = bool(getattr(app, "read_only", False))
        return [
            a for a in ACTIONS
            if not (read_only and a.action in MUTATING)
            and (on_dashboard or a.action.split("(")[0] not in DASHBOARD)
        ]  # fmt: skip

    async def discover(self) -> Hits:
        for action in self._allowed():
            yield DiscoveryHit(action.label, partial(self.app.run_action, action.action),
                               help=action.help)  # fmt: skip

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for action in self._allowed():
            text = f"{action.label}: {action.help}"
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text),
                          partial(self.app.run_action, action.action), help=action.id)  # fmt: skip
