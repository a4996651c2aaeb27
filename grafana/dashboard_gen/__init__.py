"""The ragmon Grafana dashboard, built with Grafana's own typed builders (``grafana-foundation-sdk``).

Modules: ``common`` (the rules generator's thresholds, shared selectors), ``panels`` (panel and
query helpers over the SDK builders, and the grid layout), ``rows_quality`` and ``rows_operations``
(the panels, row by row; ``calibration`` the judge calibration panel of the quality row),
``dashboard`` (variables, annotations, links, the dashboard itself and its JSON).
``grafana/generate_dashboard.py`` is the command line.
"""

from .dashboard import build_dashboard, render

__all__ = ["build_dashboard", "render"]
