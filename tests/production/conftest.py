"""The fixtures the production tests share, defined in tests/support (``pg``: a PostgreSQL of the
test's own; ``store``: the test's simulated boards)."""

from support.pgserver import pg  # noqa: F401
from support.stationkit import store  # noqa: F401
