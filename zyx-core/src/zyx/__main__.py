"""``python -m zyx``: the ``zyx`` command."""

from zyx.cli import main

main()
