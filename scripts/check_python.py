"""Fail early, with a fix, when the interpreter is too old for spillway."""

import sys

if sys.version_info < (3, 11):
    sys.exit(
        f"spillway needs Python 3.11 or newer, found {sys.version.split()[0]}: "
        "install python3.11 (Debian: apt-get install python3.11 python3.11-venv) "
        "and run `make PYTHON=python3.11 ...`"
    )
