"""``gateway console``: a read-only web console for a deployment of clusters (docs/console.md).

:mod:`.poller` polls every cluster's leader for its Status in the background and keeps an
hour of samples per channel; :mod:`.views` turns what it holds into the JSON of
``/api/v1/...``; :mod:`.exceptions` reads the conflict exceptions tables; :mod:`.server` serves
the JSON, the page (``static/``, package data: no build step, no CDN) and the few actions an
admin token allows. It imports only the client and the generated messages.
"""

from __future__ import annotations
