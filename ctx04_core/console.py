"""Where the command line speaks to the person at the terminal: its stderr
console and the one-line failure every command uses for bad input.

Its own module so that ``ctx04 eval``'s commands (``bench/cli.py``) and the
main CLI share them without importing each other.
"""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

stderr = Console(stderr=True)


def fail(message: str) -> NoReturn:
    """Bad input: one line on stderr, exit code 2, never a traceback."""
    stderr.print(f"[bold red]ctx04: error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(2)
