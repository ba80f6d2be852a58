"""One self-contained HTML page of the batch statistics: the percentile table and the charts
as base64 PNGs (it opens anywhere, mailed or attached, with nothing beside it)."""

import base64
import html
from datetime import UTC, datetime

from maple_engine.report.charts import CHARTS


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def html_report(title: str, scope: str, table: list[dict[str, str]], pngs: dict[str, bytes]) -> str:
    """The page: ``title``, what it covers (``scope``), the table rows, then every chart."""
    head = "".join(f"<th>{html.escape(k)}</th>" for k in (table[0] if table else {}))
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row.values()) + "</tr>"
        for row in table
    )
    figures = "".join(
        f'<figure><img alt="{html.escape(CHARTS[name])}" src="{data_uri(png)}"></figure>'
        for name, png in pngs.items()
    )
    made = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    empty = "" if table else "<p>No batches recorded yet.</p>"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: 4px 8px; text-align: right; white-space: nowrap; }}
th:nth-child(-n+2), td:nth-child(-n+2) {{ text-align: left; }}
th {{ background: #f3f3f3; }}
figure {{ margin: 1.5em 0; }} img {{ max-width: 100%; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>{html.escape(scope)} &middot; made {made}</p>
<h2>Turnaround and throughput per provider and model</h2>
{empty}<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>
<h2>Charts</h2>
{figures}
</body></html>
"""


def markdown_report(table: list[dict[str, str]], pngs: dict[str, bytes]) -> str:
    """The same as Markdown (the Dagster UI renders it in an asset's metadata): the table, then
    the charts as data-URI images."""
    lines = []
    if table:
        lines.append("| " + " | ".join(table[0]) + " |")
        lines.append("|" + "---|" * len(table[0]))
        lines += ["| " + " | ".join(row.values()) + " |" for row in table]
    else:
        lines.append("No batches recorded.")
    lines += [f"\n![{CHARTS[name]}]({data_uri(png)})" for name, png in pngs.items()]
    return "\n".join(lines)
