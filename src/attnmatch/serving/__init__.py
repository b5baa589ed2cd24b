"""`attnmatch serve`: matching models behind an HTTP API (FastAPI on uvicorn).

Install the extra: `pip install 'attnmatch[serve]'`. See docs/serving.md.

Example:
    >>> from attnmatch.matcher import load_matcher
    >>> from attnmatch.serving import ServeSettings, create_app
    >>> app = create_app({"bm25": load_matcher("bm25")}, settings=ServeSettings())
"""

from attnmatch.serving.app import ServeSettings, create_app
from attnmatch.serving.batching import Batcher

__all__ = ["Batcher", "ServeSettings", "create_app"]
