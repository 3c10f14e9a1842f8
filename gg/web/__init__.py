"""The web console: server-rendered pages over the same use cases the HTTP API calls.

``install(app)`` adds the pages at ``/`` and ``/ui/...`` to the server's app. Routes here
are as thin as ``gg/server/routes``: read the session, call ``gg.control``, render a
template. Sentences (waiting, remedy, checks, attention) come from the control layer as
they do for ``gg``; templates only place them.
"""

from gg.web.routes import install

__all__ = ["install"]
