"""matplotlib, loaded only when a figure is drawn (the optional ``plot`` extra)."""

from __future__ import annotations

__all__ = ["MissingMatplotlib", "figure"]


class MissingMatplotlib(ImportError):
    """matplotlib (the ``plot`` extra) is not installed."""


def figure(figsize=(6.4, 4.4)):
    """A matplotlib Figure on the Agg canvas (no pyplot state); :class:`MissingMatplotlib` if absent."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingMatplotlib("plotting needs matplotlib: pip install 'dpcert[plot]' "
                                "(or pip install matplotlib)") from None
    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig
