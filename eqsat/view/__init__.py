"""Views: the data of reports, results and sessions rendered as text tables, HTML and pictures.

- `display`: pictures (graphviz) and HTML for notebooks, the text report
- `tables`: plain-text and HTML tables; `model_view`: a model's nodes for pictures
- `progress`: the phase line a long command shows on a terminal

Layer rule: imports the engine, the checks, the front end and the base; the data it renders comes in as
arguments.
"""
