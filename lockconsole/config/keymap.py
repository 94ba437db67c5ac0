"""The console's rebindable action ids and their default keys, for checking `[keys]` in the
config without loading the UI (the console's bindings are built from the same ids)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

# action id -> default key; lockconsole.tui.bindings.ACTIONS uses exactly these
DEFAULT_KEYS: dict[str, str] = {
    "trigger": "t",
    "pause_job": "P",
    "release": "x",
    "duplicates": "d",
    "describe": "i",
    "timeline": "s",
    "story": "w",
    "alerts": "exclamation_mark",
    "travel": "b",
    "now": "N",
    "filter": "slash",
    "audit": "a",
    "older": "m",
    "group": "g",
    "maximise": "z",
    "sort": "S",
    "sort_next": "greater_than_sign",
    "sort_previous": "less_than_sign",
    "pause": "p",
    "refresh": "r",
    "log": "o",
    "focus_jobs": "1",
    "focus_holders": "2",
    "focus_history": "3",
    "help": "question_mark",
    "quit": "q",
    "close_filter": "escape",
}

# action id -> key of the console's bindings that keep their key: not rebindable, but no other
# action may take their key (ctrl+c quits on every screen, ahead of everything)
FIXED_KEYS: dict[str, str] = {
    "interrupt": "ctrl+c",
}


def check_keymap(keymap: Mapping[str, object], error: Callable[[str, str], Exception]) -> None:
    """Raise error(action, message) for an unknown action id, a non-key, or a key bound twice."""
    bound: dict[str, str] = {}
    for action, binding in keymap.items():
        if action in FIXED_KEYS:
            raise error(action, f"{action!r} keeps its key {FIXED_KEYS[action]!r}")
        if action not in DEFAULT_KEYS:
            raise error(
                action,
                f"unknown action id {action!r} (choose from {', '.join(sorted(DEFAULT_KEYS))})",
            )
        if not isinstance(binding, str) or not binding.strip():
            raise error(action, f'must be a key like "q", not {binding!r}')
    effective = {**DEFAULT_KEYS, **FIXED_KEYS, **keymap}
    # the rebound ones first: they name the clash
    for action in (*keymap, *DEFAULT_KEYS, *FIXED_KEYS):
        for key in str(effective[action]).split(","):
            other = bound.setdefault(key.strip(), action)
            if other != action:
                culprit = action if action in keymap else other  # the line that rebound it
                raise error(
                    culprit, f"key {key.strip()!r} is bound to both {other!r} and {action!r}"
                )
