"""The dashboard, the console's default screen: the screen itself with its widgets, keys and
layout (`screen.py`), what it does with its selection (`actions.py`), and its side of a
slot's story and of time travel (`story_actions.py`)."""
