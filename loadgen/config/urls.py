"""The server's URL as the flags give it: ``--base-url``, or ``--host`` and ``--port``.

Checked before anything starts (``Validated.validate``), with any password in the URL shown as
``***``; ``path_hint`` warns of the ``/v1`` given twice (``--base-url http://h:8000/v1`` with
``--endpoint /v1/completions``).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from loadgen.records.redact import redact_text

SCHEMES = ("http", "https")


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a server's base URL (scheme http or https, a host, a valid port,
    no query or fragment, no blank), or None."""
    if not url or any(char.isspace() for char in url):
        return "a URL has no blanks" if url else "empty"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # an unclosed IPv6 bracket, a port that is no number or too big
        return f"not a URL ({str(exc)[:1].lower()}{str(exc)[1:]})"
    if parts.scheme not in SCHEMES:
        return f"needs http:// or https:// before the host (as in http://{_host_part(url)})"
    if not parts.hostname:
        return "no host (as in http://HOST:PORT)"
    if port == 0:
        return "port 0 (a server's port is 1..65535)"
    if parts.query or parts.fragment:
        return "the endpoint is added after it: no ?query or #fragment"
    return None


def _host_part(url: str) -> str:
    """What follows a bad scheme, as the host the user likely meant (its password masked)."""
    rest = url.split("://", 1)[1] if "://" in url else url
    return masked(rest) or "HOST:PORT"


def masked(url: str) -> str:
    """``url`` with its password as ``***``, also without a scheme (``user:pw@host:port``)."""
    if "://" in url:
        return redact_text(url)
    return redact_text(f"http://{url}")[len("http://") :]


def host_problem(host: str) -> str | None:
    """Why ``host`` cannot be a host name or address for ``--host``, or None."""
    if not host:
        return "empty"
    if "/" in host or any(char.isspace() for char in host):
        return "a host name or address, not a URL (--base-url takes a URL)"
    return None


def check_server_url(base_url: str | None, host: str, port: int, server_url: str) -> str | None:
    """The one-line error for the server flags (``--base-url``, else ``--host`` and
    ``--port``), a URL's password shown as ``***``; None when they make a usable URL."""
    if base_url is not None:
        problem = url_problem(base_url)
        return f"--base-url {masked(base_url)}: {problem}" if problem else None
    if problem := host_problem(host):
        return f"--host {masked(host)!r}: {problem}"
    if not 1 <= port <= 65535:
        return f"--port must be in 1..65535, got {port}"
    if problem := url_problem(server_url):
        return f"--host {masked(host)}: {problem.replace(host, masked(host))}"
    return None


def path_hint(base_url: str | None, endpoint: str, endpoint_given: bool) -> str | None:
    """A warning when ``--base-url`` and ``--endpoint`` join into a path that is likely not
    meant: the base URL's last segment given again (``http://h:8000/v1`` + ``/v1/completions``
    goes to ``/v1/v1/completions``), or a ``/`` at the joint (``//v1/completions``); None
    otherwise. Upstream joins them as they are, and so does loadgen: the server may serve that
    path."""
    if base_url is None or not endpoint.startswith("/"):
        return None
    try:
        path = urlsplit(base_url).path
    except ValueError:
        return None
    shown = f"--endpoint {endpoint}" + ("" if endpoint_given else " (the default)")
    url = redact_text(base_url + endpoint)
    base = f"--base-url {redact_text(base_url)}"
    if path.endswith("/"):
        return (
            f"{base} ends with / and {shown} starts with one: requests go to {url}; drop the "
            "last / from --base-url unless the server serves that path"
        )
    last = path.rsplit("/", 1)[-1]
    if last and endpoint.lstrip("/").split("/", 1)[0] == last:
        return (
            f"{base} ends with /{last} and {shown} starts with it: requests go to {url}; drop "
            f"/{last} from --base-url unless the server serves that path"
        )
    return None
