"""The console script's entry point.

`cbledger --help` and `cbledger --version` are what a user types first and most often to see
what is there, and the typer app costs an import of typer and click (more than the rest of the
process together) before it can print either. So a bare `--help` or `--version`, the only
argument, is answered here from the same table the app is built from (cli/root_help.py); any
other command line goes to the app (cli/app.py) untouched.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    argv = sys.argv[1:]
    if argv == ["--help"] or argv == ["--version"]:
        from cbledger.cli.root_help import root_help, version_line

        try:
            print(root_help() if argv == ["--help"] else version_line(), flush=True)
        except BrokenPipeError:
            # `cbledger --help | head -1`: the reader has gone, as click takes it, not an error.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return
    try:
        from cbledger.cli.app import main as app_main
    except KeyboardInterrupt:
        # Ctrl-C in the first few hundred milliseconds, before the app can handle it: one line,
        # as every later interrupt gets, not a traceback from the middle of an import
        print("interrupted before the command started: nothing was done", file=sys.stderr)
        sys.exit(130)
    app_main()


if __name__ == "__main__":
    main()
