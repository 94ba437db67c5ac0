"""The command palette offers every console action the current mode allows, found by its
label, its help line or its other words ("alert" finds the log)."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.dom import DOMNode

from lockconsole.tui.bindings import ACTIONS, ConsoleAction
from lockconsole.tui.screens.dashboard.screen import DashboardScreen


class ActionsProvider(Provider):
    """Console actions by name: the dashboard's when the palette was opened over it (as its
    keys are), the app's everywhere; none its screen's check_action refuses (read-only)."""

    def _allowed(self) -> list[tuple[ConsoleAction, DOMNode]]:
        """Each action offered, with the node that runs it."""
        allowed: list[tuple[ConsoleAction, DOMNode]] = []
        for action in ACTIONS:
            node: DOMNode = self.app
            if action.scope == "dashboard":
                if not isinstance(self.screen, DashboardScreen):
                    continue
                node = self.screen
            if action.mutates and getattr(self.app, "read_only", False):
                continue  # refused in --read-only mode: not offered
            if node.check_action(action.name, ()) is not False:
                allowed.append((action, node))
        return allowed

    async def discover(self) -> Hits:
        for action, node in self._allowed():
            run = partial(self.app.run_action, action.action, node)
            yield DiscoveryHit(action.label, run, help=action.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for action, node in self._allowed():
            text = f"{action.label}: {action.help}"
            score = max(matcher.match(text), matcher.match(action.words) * 0.8)
            if score > 0:
                run = partial(self.app.run_action, action.action, node)
                yield Hit(score, matcher.highlight(text), run, help=action.id)
