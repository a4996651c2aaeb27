"""Who may connect: TLS server contexts (optionally verifying client certificates), bearer
tokens, and the rule that a port reachable beyond loopback needs one of them.

Shared by the OTLP/HTTP receiver and the metrics server; see docs/security.md.
"""

from __future__ import annotations

import hmac
import ipaddress
import ssl
from collections.abc import Callable

from .errors import ConfigError

__all__ = ["BearerToken", "is_loopback", "require_protected_bind", "server_ssl_context"]

WAIVER_FLAG = "--insecure-allow-unauthenticated-bind (RAGMON_INSECURE_ALLOW_UNAUTHENTICATED_BIND)"


def is_loopback(host: str) -> bool:
    """True for addresses that never leave the machine (127.0.0.0/8, ::1, localhost).
    An empty host, 0.0.0.0 or :: listens on every interface: not loopback."""
    host = host.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a hostname: it may resolve to anything


def require_protected_bind(what: str, setting: str, host: str, *, tls: bool, token: bool, waived: bool) -> None:
    """Refuse to listen beyond loopback without TLS or a bearer token unless explicitly waived."""
    if is_loopback(host) or tls or token or waived:
        return
    raise ConfigError(
        setting,
        f"{what} would listen on {host!r} (reachable beyond this machine) without TLS or a bearer token; "
        f"configure one (docs/security.md) or accept the risk with {WAIVER_FLAG}",
    )


class BearerToken:
    """``Authorization: Bearer <token>`` checked in constant time."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    def accepts(self, authorization: str | None) -> bool:
        if not authorization:
            return False
        try:
            given = authorization.strip().encode()
        except UnicodeEncodeError:
            return False
        return hmac.compare_digest(given, self._expected)


def server_ssl_context(cert_file: str, key_file: str, client_ca_file: str | None,
                       on_handshake_failure: Callable[[], None], *, setting: str) -> ssl.SSLContext:
    """A TLS 1.2+ server context; with ``client_ca_file`` clients must present a certificate signed
    by that CA (mutual TLS). ``on_handshake_failure`` is called for every failed handshake, so
    refused clients (an untrusted certificate, none at all) can be counted."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_file, key_file)
        if client_ca_file:
            context.load_verify_locations(cafile=client_ca_file)
            context.verify_mode = ssl.CERT_REQUIRED
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(setting, f"cannot load TLS files: {exc}") from exc
    context.sslobject_class = _counting_sslobject(on_handshake_failure)
    return context


def _counting_sslobject(on_failure: Callable[[], None]) -> type[ssl.SSLObject]:
    class CountingSSLObject(ssl.SSLObject):
        """asyncio drives every TLS connection through an SSLObject: a failed handshake raises here."""

        def do_handshake(self) -> None:
            try:
                super().do_handshake()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                raise  # the handshake is still in progress
            except ssl.SSLError:
                on_failure()
                raise

    return CountingSSLObject
