"""What a stand-in for kubernetes.aio's ApiClient returns: an answer the client reads whole."""

from __future__ import annotations

import json
from typing import Any


class Answer:
    """An HTTP answer with a JSON body, as ``KubeClient`` reads one (status, reason, read)."""

    def __init__(self, status: int, body: Any) -> None:
        self.status, self.reason, self._body = status, "", json.dumps(body).encode()

    async def read(self) -> bytes:
        return self._body
