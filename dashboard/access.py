"""Who may change things: viewer mode, and sign-in for admin actions from another machine.

Pure decisions, no Streamlit: dashboard/session.py gathers the session's facts (environment,
secrets, client address, signed-in user) and the pages ask the resulting `Access`. The job
queue refuses writes on its own too (engine/run/jobs/queue.py), so a page that forgot to ask, or a
crafted request, still changes nothing.

- Viewer mode (`BENCH_VIEWER=1`, or `viewer = true` under `[dashboard]` in
  `.streamlit/secrets.toml`): read-only for everyone; no Run page, no launch, cancel or import.
- Otherwise a session on this machine (loopback, no forwarding proxy in between) may write:
  it is the person who started the server.
- A session from another machine (or through a reverse proxy, which makes every client look
  local: its X-Forwarded-For / X-Real-IP / Forwarded header marks it remote; a proxy that adds
  none needs `trust_loopback = false`) may write only when signed in (`st.login`, OIDC
  configured under `[auth]`) with an e-mail on the `admins` list under `[dashboard]`. Being signed in is authentication; the list
  is the authorisation.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

__all__ = ["Access", "decide", "viewer_mode", "is_remote", "TRUE_WORDS", "PROXY_HEADERS"]

TRUE_WORDS = ("1", "true", "yes", "on")
# A reverse proxy (nginx, Caddy, a cloud load balancer) connects from loopback and names the
# real client in one of these; jupyter-server-proxy sets X-Forwarded-* only when configured to,
# and its own users are already signed in to Jupyter (see docs/SHARING.md).
PROXY_HEADERS = ("x-forwarded-for", "x-real-ip", "forwarded")


def viewer_mode(env: dict, settings: dict) -> bool:
    """BENCH_VIEWER in the environment wins; else `[dashboard] viewer` in secrets.toml."""
    raw = env.get("BENCH_VIEWER")
    if raw is not None and raw.strip() != "":
        return raw.strip().lower() in TRUE_WORDS
    value = settings.get("viewer", False)
    return value is True or (isinstance(value, str) and value.strip().lower() in TRUE_WORDS)


def _loopback(address: str | None) -> bool:
    if address is None:  # st.context.ip_address: None is Streamlit's word for a loopback peer
        return True
    try:
        return ipaddress.ip_address(address.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def is_remote(ip_address: str | None, headers: dict, *, trust_proxy: bool = False,
              trust_loopback: bool = True) -> bool:
    """True unless the client is this machine with no proxy in between. An address that is
    not an IP counts as remote: a wrong guess must cost a sign-in, not open the door.
    trust_proxy: the proxy in front signs its users in itself (jupyter-server-proxy behind a
    notebook service's front proxy), so its forwarding headers do not make a session remote.
    trust_loopback=False: every session is remote (a proxy that adds no forwarding header)."""
    if not trust_loopback:
        return True
    low = {k.lower(): v for k, v in headers.items()}
    if not trust_proxy and any(h in low for h in PROXY_HEADERS):
        return True
    return not _loopback(ip_address)


def _flag(env: dict, name: str, settings: dict, key: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is not None and raw.strip() != "":
        return raw.strip().lower() in TRUE_WORDS
    value = settings.get(key, default)
    if isinstance(value, str):
        return value.strip().lower() in TRUE_WORDS
    return value is True


@dataclass(frozen=True)
class Access:
    viewer: bool
    remote: bool
    auth_configured: bool
    email: str | None  # the signed-in user's e-mail, when signed in
    admin: bool  # the e-mail is on the admins list

    @property
    def can_write(self) -> bool:
        return not self.viewer and (not self.remote or self.admin)

    @property
    def needs_sign_in(self) -> bool:
        """A remote session that could become an admin by signing in."""
        return not self.viewer and self.remote and self.auth_configured and not self.email

    def why_read_only(self) -> str:
        """One line for the page; empty when the session may write."""
        if self.viewer:
            return ("viewer mode: this dashboard is read-only (started with BENCH_VIEWER=1 or "
                    "[dashboard] viewer = true); results can be read, shared and downloaded")
        if self.can_write:
            return ""
        if not self.auth_configured:
            return ("read-only from another machine: sign-in is not configured (add [auth] and "
                    "[dashboard] admins to .streamlit/secrets.toml), or reach the dashboard "
                    "through an SSH tunnel")
        if not self.email:
            return "read-only until you sign in: launching and cancelling need an admin"
        return (f"read-only: {self.email} is signed in but is not on the admins list "
                "([dashboard] admins in .streamlit/secrets.toml)")


def decide(*, env: dict, settings: dict, auth_configured: bool, ip_address: str | None,
           headers: dict, email: str | None) -> Access:
    listed = settings.get("admins") or []
    if isinstance(listed, str):  # admins = "a@x" instead of a list: still one admin
        listed = [listed]
    admins = {str(a).strip().lower() for a in listed if str(a).strip()}
    mail = email.strip().lower() if email else None
    remote = is_remote(ip_address, headers,
                       trust_proxy=_flag(env, "BENCH_TRUST_PROXY", settings, "trust_proxy", False),
                       trust_loopback=_flag(env, "BENCH_TRUST_LOOPBACK", settings,
                                            "trust_loopback", True))
    return Access(viewer=viewer_mode(env, settings), remote=remote,
                  auth_configured=auth_configured, email=mail,
                  admin=bool(mail) and mail in admins)
