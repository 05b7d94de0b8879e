"""REST door of the context compiler: ``POST /v1/graph/compile``.

A POST because the query can be long, but it only reads: a read-scoped key may call it, and the
project is resolved with read access, from the body's ``project`` or the query parameter. The
body, the answer and their OpenAPI come from the operation's models
(``graph_app.contracts.compile``).
"""

from __future__ import annotations

from graph_app.operations import CONTEXT_COMPILE
from memoryproject.drf import OperationView


class ContextCompileView(OperationView):
    """The most relevant memory for a query, packed under a token budget, every line cited."""

    operation = CONTEXT_COMPILE
