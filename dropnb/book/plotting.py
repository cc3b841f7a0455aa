"""The book's figure style: white background, labelled axes, a colour-blind-safe palette.

The palette is Okabe and Ito's; figures keep an opaque white face so they read in dark mode, and
notebooks show them at twice their resolution.
"""

from __future__ import annotations

import matplotlib as mpl
from cycler import cycler

PALETTE = {
    "blue": "#0072B2",
    "orange": "#E69F00",
    "green": "#009E73",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
    "sky": "#56B4E9",
    "yellow": "#F0E442",
    "black": "#000000",
}

STYLE = {
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "savefig.facecolor": "white",
    "savefig.transparent": False,
    "figure.figsize": (6.4, 3.6),
    "figure.dpi": 110,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": "medium",
    "axes.labelsize": "medium",
    "legend.frameon": False,
    "axes.prop_cycle": cycler(color=list(PALETTE.values())),
}


def use_style() -> None:
    """Apply the book's matplotlib style to every later figure; in a notebook, figures are shown as
    PNGs at twice their resolution (``retina``), so they stay sharp on high-density screens."""
    mpl.rcParams.update(STYLE)
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:
        return
    if get_ipython() is not None:
        set_matplotlib_formats("retina")
