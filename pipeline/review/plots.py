"""The report's plots: matplotlib bar charts, embedded in the page as PNG data URIs (so a page
opened from disk needs no other file and no network)."""
from __future__ import annotations

import base64
import io


def bars(title: str, labels: list[str], series: dict[str, list[float | None]], ylabel: str,
         top: float | None = 1.05, size: tuple[float, float] | None = None) -> str:
    """A grouped bar chart as a data: URI; a missing value is drawn as "n/a"."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=size or (min(12.0, max(5.0, 0.6 * len(labels) * len(series) + 2.5)), 3.2))
    for i, (name, values) in enumerate(series.items()):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(labels))]
        ax.bar(xs, [v if v is not None else 0.0 for v in values], width, label=name)
        for x, v in zip(xs, values):
            if v is None:
                ax.text(x, 0.01, "n/a", ha="center", va="bottom", fontsize="x-small", rotation=90)
    tilt = len(labels) > 5
    ax.set_xticks(range(len(labels)), labels, rotation=30 if tilt else 0, ha="right" if tilt else "center",
                  fontsize="small")
    if top is not None:
        ax.set_ylim(0, top)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize="medium")
    if len(series) > 1:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=96)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
