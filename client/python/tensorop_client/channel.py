"""How the Python client reaches tensord, as the C++ client does (client/channel.h):
one address, a list of replicas, or a DNS name that resolves to every replica,
with calls spread round-robin over the healthy replicas and retried on another
one when a replica is UNAVAILABLE (every tensorop call is idempotent).

The service config is client/service_config.json, shared with the C++ client and
copied into this package at build time (setup.py).
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Mapping
from importlib import resources

import grpc

# Target schemes gRPC resolves.
_SCHEMES = ("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:")


def service_config_json() -> str:
    """round_robin, client-side health checking of tensorop.v1.TensorOp, and
    retries of UNAVAILABLE for every TensorOp method."""
    return resources.files("tensorop_client").joinpath("service_config.json").read_text()


def replica_service_config_json() -> str:
    """The service config of a channel to one replica (handle calls): the one
    above with pick_first and no health checking, since a draining replica
    still serves its handles while its health says NOT_SERVING."""
    config = json.loads(service_config_json())
    config["loadBalancingConfig"] = [{"pick_first": {}}]
    config.pop("healthCheckConfig", None)
    return json.dumps(config)


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


def target_authority(target: str) -> str | None:
    """The authority `target` (as the user typed it) names one host by, as the
    C++ client's TargetAuthority: "name:port" for "name:port",
    "dns:///name:port" and "dns://server/name:port"; None for a list of
    addresses or an ipv4:, ipv6: or unix: target. With TLS, replica channels
    present it, so certificates issued for the name the user dialled (a
    Kubernetes Service's) verify when a pod is reached by its IP."""
    if target.startswith("dns:"):
        rest = target[len("dns:") :]
        if rest.startswith("//"):
            _, slash, rest = rest[2:].partition("/")
            if not slash:
                return None
        return rest
    if target.startswith(_SCHEMES) or "," in target or not target.strip():
        return None
    return target


def _options(max_message_bytes: int, service_config: str) -> list[tuple[str, int | str]]:
    return [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.service_config", service_config),
    ]


def channel_options(max_message_bytes: int) -> list[tuple[str, int | str]]:
    """Channel arguments: message limits both ways and the service config."""
    return _options(max_message_bytes, service_config_json())


def replica_channel_options(
    max_message_bytes: int, authority: str | None = None
) -> list[tuple[str, int | str]]:
    """A replica channel's arguments: the message limits, the replica service
    config, no health checking and, when given, `authority` (target_authority)."""
    options = _options(max_message_bytes, replica_service_config_json())
    options.append(("grpc.inhibit_health_checking", 1))
    if authority:
        options.append(("grpc.default_authority", authority))
    return options


# Transport security (docs/security.md), as the C++ client's ChannelSecurity:
# the environment fills what the caller leaves out, so tokens stay out of shell
# history and source code.
ENVIRONMENT = {
    "ca_file": "TENSOROP_CA_FILE",
    "cert_file": "TENSOROP_CERT_FILE",
    "key_file": "TENSOROP_KEY_FILE",
    "token_file": "TENSOROP_TOKEN_FILE",
}


def _read_option_file(option: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ValueError(f"--{option}={path}: cannot read the file: {e.strerror}") from None
    if not data.strip():
        raise ValueError(f"--{option}={path}: the file is empty")
    return data


def channel_credentials(
    tls: bool = False,
    ca_file: str | None = None,
    cert_file: str | None = None,
    key_file: str | None = None,
    token_file: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> grpc.ChannelCredentials | None:
    """TLS credentials for a channel, or None for plaintext. Options left None
    come from TENSOROP_TLS (1/true/yes), TENSOROP_CA_FILE, TENSOROP_CERT_FILE,
    TENSOROP_KEY_FILE and TENSOROP_TOKEN_FILE; any file implies TLS. `ca_file`:
    the CA the server's certificate must chain to (default: the system's
    roots); `cert_file` and `key_file`: a client certificate (mutual TLS);
    `token_file`: a file holding the bearer token, sent as "authorization:
    Bearer <token>" on every call. Raises ValueError naming the option and the
    file when one cannot be read."""
    env = os.environ if environ is None else environ
    files = {
        "ca_file": ca_file,
        "cert_file": cert_file,
        "key_file": key_file,
        "token_file": token_file,
    }
    for option, variable in ENVIRONMENT.items():
        if not files[option]:
            files[option] = env.get(variable) or None
    tls = tls or env.get("TENSOROP_TLS", "").lower() in ("1", "true", "yes")
    if not tls and not any(files.values()):
        return None
    if bool(files["cert_file"]) != bool(files["key_file"]):
        raise ValueError(
            "--cert_file and --key_file go together: a client certificate needs its key"
        )
    roots = _read_option_file("ca_file", files["ca_file"]) if files["ca_file"] else None
    chain = key = None
    if files["cert_file"] and files["key_file"]:  # both or neither (above)
        chain = _read_option_file("cert_file", files["cert_file"])
        key = _read_option_file("key_file", files["key_file"])
    credentials = grpc.ssl_channel_credentials(
        root_certificates=roots, private_key=key, certificate_chain=chain
    )
    if files["token_file"]:
        token = _read_option_file("token_file", files["token_file"]).decode().strip()
        # gRPC sends call credentials only over TLS: the token never travels in plaintext.
        credentials = grpc.composite_channel_credentials(
            credentials, grpc.access_token_call_credentials(token)
        )
    return credentials


def explain_security_error(code: str, message: str, tls: bool = False) -> str:
    """`message` with a sentence in front saying which part of transport security
    failed, when gRPC's message shows it (the C++ client's ExplainSecurityError
    and ExplainClosedConnection: `tls` says whether the channel used TLS);
    otherwise unchanged."""
    # UNAUTHENTICATED names itself, and tensord's message says whether the token
    # was missing or refused.
    if code != "UNAVAILABLE":
        return message
    lowered = message.lower()
    # Older gRPC says "Peer name ... is not in peer certificate", newer
    # "Hostname Verification Check failed".
    if ("peer name" in lowered and "not in peer certificate" in lowered) or (
        "hostname verification check failed" in lowered
    ):
        return (
            "TLS hostname mismatch: the server's certificate does not name the host in "
            f"the target: {message}"
        )
    if "certificate_verify_failed" in lowered or "certificate verify failed" in lowered:
        return (
            "TLS: the server's certificate is not trusted (not signed by ca_file / "
            f"TENSOROP_CA_FILE, or by the system's roots without one): {message}"
        )
    if "wrong_version_number" in lowered or "wrong version number" in lowered:
        return f"TLS: the server does not speak TLS on this port (drop tls): {message}"
    if "socket closed" in lowered:
        # TLS 1.3 clients learn that mutual TLS refused them only when the server
        # closes the connection; a TLS server also closes a plaintext client's.
        if tls:
            return (
                "TLS: the server closed the connection during or right after the handshake; "
                "with mutual TLS it does so for a missing client certificate, one from another "
                f"CA or an expired one (cert_file, key_file): {message}"
            )
        return (
            "the server closed the connection at once; if it serves TLS, connect with tls "
            f"(and ca_file): {message}"
        )
    for alert in (
        "alert_certificate_required",
        "alert_handshake_failure",
        "alert_bad_certificate",
        "alert_unknown_ca",
        "alert_certificate_expired",
    ):
        if alert in lowered:
            return (
                "TLS: the server refused our client certificate, or its absence (mutual TLS: "
                f"cert_file and key_file, signed by the server's client CA, not expired): {message}"
            )
    return message
