"""``python -m maple_assets.cli``: the ``maple`` command."""

from maple_assets.cli import main

main()
