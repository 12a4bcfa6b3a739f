"""The optional plotting libraries (the ``[plot]`` extra): which each plot flag needs, and
which of them are missing. Asked by the configuration's checks. (report.html needs none: its
charts are pygal's SVG, a core dependency.)"""

from __future__ import annotations

import importlib.util

PLOT_LIBRARIES = {
    "--plot-timeline": ("plotly", "pandas"),
    "--plot-dataset-stats": ("matplotlib",),
}
PLOT_EXTRA = "pip install 'loadgen[plot]'"


def missing_libraries(flag: str) -> list[str]:
    """The libraries a plot flag needs that are not installed."""
    return [name for name in PLOT_LIBRARIES[flag] if importlib.util.find_spec(name) is None]
