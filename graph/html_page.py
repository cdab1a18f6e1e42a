"""Small helpers shared by the HTML reports: a standalone page (inline CSS, no external URL,
script or font), escaped tables, and matplotlib figures embedded as PNG data URIs.

Figures are drawn with the Agg backend: the machines that make reports have no display."""

from __future__ import annotations

import base64
import html
import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

DPI = 110  # readable on a laptop screen, small enough to embed several

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1200px; padding: 0 1em; color: #1d1d1f; line-height: 1.45; }
h1 { font-size: 1.6em; border-bottom: 2px solid #ddd; padding-bottom: .3em; }
h2 { font-size: 1.25em; margin-top: 1.8em; border-bottom: 1px solid #eee; }
table { border-collapse: collapse; margin: .8em 0; font-size: .9em; }
th, td { border: 1px solid #d0d7de; padding: .3em .6em; text-align: left; }
th { background: #f3f5f7; position: sticky; top: 0; }
tr:nth-child(even) td { background: #fafbfc; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; height: auto; display: block; margin: .8em 0; }
code, pre { font-family: Menlo, Consolas, monospace; font-size: .9em; }
pre { background: #f6f8fa; padding: .8em; overflow-x: auto; }
.muted { color: #6e7781; }
"""


def figure_png_data_uri(fig: Figure, dpi: int = DPI) -> str:
    """The figure as a "data:image/png;base64,..." URI; the figure is closed."""
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    finally:
        plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def speedup_ticks(axis, values: list[float]) -> None:
    """Label a log-scale speedup axis (ax.xaxis or ax.yaxis) "0.5x", "1x", "2x"; minor ticks
    get labels only where the values span less than a decade."""
    times = FuncFormatter(lambda v, _: f"{v:g}x")
    axis.set_major_formatter(times)
    low, high = min(values, default=1.0), max(values, default=1.0)
    axis.set_minor_formatter(times if high < 10 * low else NullFormatter())


def img(fig: Figure, alt: str) -> str:
    """An <img> holding the figure (closed afterwards)."""
    return f'<img alt="{html.escape(alt)}" src="{figure_png_data_uri(fig)}">'


def esc(text: object) -> str:
    return html.escape(str(text))


def _numeric(cell: str) -> bool:
    text = cell.strip().rstrip("x%").replace(",", "")
    try:
        float(text)
    except ValueError:
        return False
    return True


def html_table(header: list[str], rows: list[list[str]]) -> str:
    """A table; every cell is escaped, numbers are right-aligned."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="num">{esc(c)}</td>' if _numeric(str(c)) else f"<td>{esc(c)}</td>"
            for c in row
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def md_table(header: list[str], rows: list[list[str]]) -> str:
    """The same table in Markdown (the reports' .md twin); pipes and newlines are escaped."""

    def cell(text: object) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def section(title: str, *parts: str) -> str:
    """A titled section; `parts` are HTML already."""
    return f"<section><h2>{esc(title)}</h2>{''.join(parts)}</section>"


def paragraph(text: str) -> str:
    return f"<p>{esc(text)}</p>"


def page(title: str, sections: list[str]) -> str:
    """A complete standalone HTML5 document; `sections` are HTML already."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n"
        f"<body>\n<h1>{esc(title)}</h1>\n" + "\n".join(sections) + "\n</body>\n</html>\n"
    )
