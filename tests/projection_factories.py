"""The builders live in `tests.factories`; this name stays for the tests that still import it."""

from tests.factories import MAINTAINER, rich_stream  # noqa: F401
