"""A base URL that must carry no credentials: the judge's endpoint (``judge_base_url``, ``base_url=``,
``OPENAI_BASE_URL``). The HTTP client logs every request's URL at INFO level, and the openai SDK appends
the endpoint path after a query string, so user information, a query string or a fragment is refused;
an error shows the URL without them (:func:`safe_url`).
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["check_base_url", "safe_url"]

_KEY_ADVICE = "Pass the key as api_key (sent in the Authorization header)"


def safe_url(url: str | None) -> str | None:
    """``scheme://host[:port]/path`` of ``url``: without user information, query and fragment (where
    credentials go); ``None`` for ``None``."""
    if url is None:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address keeps its brackets (urlsplit's hostname drops them)
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # not a number: maybe part of a password, so not shown
        port = None
    if port is not None:
        host = f"{host}:{port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def check_base_url(url: str, source: str = "", key_advice: str = _KEY_ADVICE) -> None:
    """Refuse a base URL that could carry credentials.

    Raises:
        ValueError: starting with ``source`` (when given), when ``url`` has user information (any ``@``),
            a query string or a fragment (any ``?`` / ``#``); the message shows the URL without those
            parts (:func:`safe_url`), or not at all when a password may have confused the parse, and ends
            with ``key_advice`` (where the key goes instead).
    """
    problems = [
        what
        for mark, what in (("@", "user information"), ("?", "a query string"), ("#", "a fragment"))
        if mark in url
    ]
    if not problems:
        return
    parts = urlsplit(url)
    # An '@' after the host part means a password with an unescaped '/', '?' or '#' confused the
    # parse (host, port and path may hold pieces of it): then nothing of the URL is shown.
    misparsed = "@" in parts.path + parts.query + parts.fragment
    shown = "not shown" if misparsed else f"without them: {safe_url(url)}"
    subject = f"{source} must" if source else "must"
    raise ValueError(
        f"{subject} not contain {' or '.join(problems)} (URL {shown}): the HTTP client logs every "
        "request's URL at INFO level, and the openai SDK appends the endpoint path after a query string. "
        f"{key_advice}; other credentials belong in a header, never in the URL."
    )
