"""Plain-text tables for ``maple costs`` and ``maple status``, drawn by ``rich``.

No colour and no wrapping (a wide virtual console), so the text is the same on a terminal, in a
pipe and in a log: a header, a rule, the rows, and an optional rule and total line. Every line
has the table's width; columns are separated by whitespace, so ``split()`` reads them.
"""

import io
from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text


def render(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    footer: Sequence[str] | None = None,
    align: str | None = None,
) -> str:
    """``rows`` under ``header``. ``align`` has one letter per column, ``l`` or ``r``; by
    default the first column is left-aligned and the others (numbers) right-aligned."""
    align = align or "l" + "r" * (len(header) - 1)
    table = Table(
        box=box.SIMPLE,
        show_edge=False,
        pad_edge=False,
        show_footer=footer is not None,
        header_style="",
        footer_style="",
    )
    for i, name in enumerate(header):
        table.add_column(
            Text(name),
            footer=Text(footer[i]) if footer is not None else "",
            justify="left" if align[i] == "l" else "right",
            no_wrap=True,
        )
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # text as it is: "[...]" is no markup
    out = io.StringIO()
    Console(file=out, width=100_000, color_system=None, force_terminal=False).print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines() if line.strip())
