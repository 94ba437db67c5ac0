"""The holders view: the painted widget (`view.py`), its rows with widths from the data and
stale holders first (`rows.py`), and what is known of one holder (`facts.py`: the describe
screen and the release dialog read it too)."""
