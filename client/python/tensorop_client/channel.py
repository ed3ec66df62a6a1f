"""How the Python client reaches tensord, as the C++ client does (client/channel.h):
one address, a list of replicas, or a DNS name that resolves to every replica,
with calls spread round-robin over the healthy replicas and retried on another
one when a replica is UNAVAILABLE (every tensorop call is idempotent).

The service config is client/service_config.json, shared with the C++ client and
copied into this package at build time (setup.py).
"""

from __future__ import annotations

import ipaddress
from importlib import resources

# Target schemes gRPC resolves.
_SCHEMES = ("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:")


def service_config_json() -> str:
    """round_robin, client-side health checking of tensorop.v1.TensorOp, and
    retries of UNAVAILABLE for every TensorOp method."""
    return resources.files("tensorop_client").joinpath("service_config.json").read_text()


def _ip_literal_family(entry: str) -> int | None:
    """4 or 6 for "1.2.3.4:80" or "[::1]:80"; None for anything else."""
    host, colon, port = entry.rpartition(":")
    if not colon or not port.isdigit() or not 1 <= int(port) <= 65535:
        return None
    bracketed = host.startswith("[") and host.endswith("]")
    try:
        version = ipaddress.ip_address(host[1:-1] if bracketed else host).version
    except ValueError:
        return None
    # IPv6 literals need their brackets, IPv4 ones must not have them.
    return version if (version == 6) == bracketed else None


def channel_target(target: str) -> str:
    """The gRPC target for what a user typed (the C++ client's ChannelTarget):
    "host:port" and gRPC target URIs ("dns:///name:port", "ipv4:...") are left
    as they are; a comma-separated list of IP literals becomes "ipv4:..." or
    "ipv6:...". Raises ValueError naming the entry for an empty target or entry,
    a list entry that is not an IP literal with a port, or a list mixing IPv4
    and IPv6."""
    if not target.strip():
        raise ValueError(
            "target is empty: expected HOST:PORT, a list of them, "
            "or a gRPC target such as dns:///NAME:PORT"
        )
    if target.startswith(_SCHEMES) or "," not in target:
        return target
    entries: list[str] = []
    family: int | None = None
    for raw in target.split(","):
        entry = raw.strip()
        if not entry:
            raise ValueError(f'target "{target}" has an empty entry {len(entries)}')
        entry_family = _ip_literal_family(entry)
        if entry_family is None:
            raise ValueError(
                f'target entry {len(entries)} "{entry}" is not an IP address with a port; '
                "a list names replicas by address (1.2.3.4:50051 or [::1]:50051), a name "
                "that resolves to every replica is one target (dns:///NAME:PORT)"
            )
        if family is not None and entry_family != family:
            raise ValueError(
                f'target entry {len(entries)} "{entry}" mixes IPv4 and IPv6 in one list; '
                "gRPC balances over one family per target"
            )
        family = entry_family
        entries.append(entry)
    return f"ipv{family}:" + ",".join(entries)


def channel_options(max_message_bytes: int) -> list[tuple[str, int | str]]:
    """Channel arguments: message limits both ways and the service config."""
    return [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.service_config", service_config_json()),
    ]
