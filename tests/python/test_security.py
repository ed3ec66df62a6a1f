"""The Python client over TLS, mutual TLS and bearer tokens against a real tensord
(issue 10), with certificates made by Debian's openssl at test time: the public
conformance cases pass over TLS with a token (from Client options and from
TENSOROP_* environment variables, through the CLI), and a missing or wrong token,
an untrusted server certificate and a missing client certificate fail with
errors saying which part failed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from conftest import Tensord, _serve
from tensorop_client import Client, TensorOpError

TOKEN = "python-test-token-0123456789abcdef"


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _ca(d: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", str(d / f"{name}.key"), "-out", str(d / f"{name}.crt"),
             "-subj", f"/CN={name}", "-days", "30")


def _cert(d: Path, name: str, ca: str, san: str | None) -> None:
    request = ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
               "-keyout", str(d / f"{name}.key"), "-out", str(d / f"{name}.csr"),
               "-subj", f"/CN={name}"]
    if san:
        request += ["-addext", f"subjectAltName={san}"]
    _openssl(*request)
    _openssl("x509", "-req", "-in", str(d / f"{name}.csr"), "-CA", str(d / f"{ca}.crt"),
             "-CAkey", str(d / f"{ca}.key"), "-CAcreateserial", "-copy_extensions", "copy",
             "-days", "30", "-out", str(d / f"{name}.crt"))


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    _ca(d, "ca")
    _cert(d, "server", "ca", "DNS:localhost,IP:127.0.0.1")
    _cert(d, "client", "ca", None)
    _ca(d, "other")
    (d / "tokens").write_text(f"# accepted\npython:{TOKEN}\n")
    (d / "client.token").write_text(TOKEN + "\n")
    (d / "wrong.token").write_text("wrong-token\n")
    return d


@pytest.fixture(scope="module")
def tls_server(
    tensord_binary: str, tmp_path_factory: pytest.TempPathFactory, pki: Path
) -> Iterator[Tensord]:
    """TLS, mutual TLS and tokens, and a plaintext health listener."""
    yield from _serve(
        tensord_binary, tmp_path_factory, "tensord-tls",
        f"--tls_cert_file={pki / 'server.crt'}", f"--tls_key_file={pki / 'server.key'}",
        f"--tls_client_ca_file={pki / 'ca.crt'}", f"--auth_token_file={pki / 'tokens'}",
    )


def _secure(pki: Path, **overrides: str | None) -> dict[str, str | None]:
    options: dict[str, str | None] = {
        "ca_file": str(pki / "ca.crt"),
        "cert_file": str(pki / "client.crt"),
        "key_file": str(pki / "client.key"),
        "token_file": str(pki / "client.token"),
    }
    options.update(overrides)
    return options


def _slice(client: Client) -> np.ndarray:
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    r = client.run("slice", {"input": x},
                   {"offsets": [0, 1], "window_sizes": [4, 3], "window_strides": [2, 2]},
                   outputs=[(2, 2)], backend="cpu")
    return r.outputs[0]


def test_run_over_mutual_tls_with_a_token(tls_server: Tensord, pki: Path) -> None:
    with Client(tls_server.address, timeout=60, **_secure(pki)) as client:
        np.testing.assert_array_equal(_slice(client), [[1, 3], [9, 11]])
    # The request log is written by its own thread, after the answer: wait for
    # the line (bounded) rather than read the file once.
    deadline = time.monotonic() + 30
    while ('"identity":"token:python cert:' not in tls_server.log.read_text()
           and time.monotonic() < deadline):
        time.sleep(0.05)
    assert '"identity":"token:python cert:' in tls_server.log.read_text()
    assert TOKEN not in tls_server.log.read_text()


def test_conformance_cli_over_tls_with_token_from_the_environment(
    tls_server: Tensord, pki: Path, cases_dir: Path, case_count: int
) -> None:
    env = dict(os.environ,
               TENSOROP_CA_FILE=str(pki / "ca.crt"), TENSOROP_CERT_FILE=str(pki / "client.crt"),
               TENSOROP_KEY_FILE=str(pki / "client.key"),
               TENSOROP_TOKEN_FILE=str(pki / "client.token"))
    result = subprocess.run(
        [sys.executable, "-m", "tensorop_client", "conformance", "--target", tls_server.address,
         str(cases_dir)], capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"conformance: {case_count} passed, 0 failed" in result.stdout


def test_conformance_cli_over_tls_with_options(
    tls_server: Tensord, pki: Path, cases_dir: Path
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tensorop_client", "conformance", "--target", tls_server.address,
         "--stream", "--ca_file", str(pki / "ca.crt"), "--cert_file", str(pki / "client.crt"),
         "--key_file", str(pki / "client.key"), "--token_file", str(pki / "client.token"),
         str(cases_dir / "slice.json")], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " passed, 0 failed" in result.stdout


@pytest.mark.parametrize(
    "token_file, says",
    [(None, "this server needs a bearer token"), ("wrong.token", "is not accepted")],
)
def test_missing_or_wrong_token_is_unauthenticated(
    tls_server: Tensord,
    pki: Path,
    token_file: str | None,
    says: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TENSOROP_TOKEN_FILE", raising=False)
    options = _secure(pki, token_file=str(pki / token_file) if token_file else None)
    with Client(tls_server.address, timeout=60, **options) as client:
        with pytest.raises(TensorOpError) as error:
            _slice(client)
    assert error.value.code == "UNAUTHENTICATED"
    assert says in error.value.message


def test_untrusted_server_certificate_says_so(tls_server: Tensord, pki: Path) -> None:
    secure = _secure(pki, ca_file=str(pki / "other.crt"))
    with Client(tls_server.address, timeout=30, **secure) as c:
        with pytest.raises(TensorOpError) as error:
            _slice(c)
    assert error.value.code == "UNAVAILABLE"
    assert "TLS: the server's certificate is not trusted" in error.value.message


def test_missing_client_certificate_is_refused(tls_server: Tensord, pki: Path) -> None:
    with Client(tls_server.address, timeout=30,
                **_secure(pki, cert_file=None, key_file=None)) as client:
        with pytest.raises(TensorOpError) as error:
            _slice(client)
    assert error.value.code == "UNAVAILABLE"
    assert "TLS: the server closed the connection during or right after the handshake" in (
        error.value.message
    )


def test_plaintext_client_to_the_tls_port_fails(tls_server: Tensord) -> None:
    with Client(tls_server.address, timeout=30) as client:
        with pytest.raises(TensorOpError) as error:
            _slice(client)
    assert error.value.code == "UNAVAILABLE"
    assert "if it serves TLS, connect with tls" in error.value.message


def test_calls_on_a_handle_verify_the_name_the_target_gave(
    tensord_binary: str, tmp_path: Path, pki: Path
) -> None:
    """A handle's calls go to its replica's own address (127.0.0.1 here) with
    the target's authority, so a certificate for that name alone verifies."""
    _cert(pki, "name-only", "ca", "DNS:localhost")
    server = Tensord(tensord_binary, tmp_path / "tensord.log",
                     f"--tls_cert_file={pki / 'name-only.crt'}",
                     f"--tls_key_file={pki / 'name-only.key'}")
    try:
        port = server.address.rpartition(":")[2]
        secure = _secure(pki, token_file=None)
        x = np.arange(4, dtype=np.uint8)
        with Client(f"localhost:{port}", timeout=30, **secure) as client:
            with client.put(x) as h:
                assert h.handle.replica == server.address
                np.testing.assert_array_equal(h.fetch(), x)
                # Dialled by its IP, the certificate does not name the host.
                with Client(server.address, timeout=30, **secure) as by_ip:
                    with pytest.raises(TensorOpError) as error:
                        by_ip.fetch(h)
        assert error.value.code == "UNAVAILABLE"
        assert error.value.message.startswith(
            f"replica {server.address} holding {h.id[:8]}... is unreachable: TLS hostname mismatch"
        )
    finally:
        server.stop()


def test_an_unreadable_file_is_named(pki: Path) -> None:
    missing = str(pki / "missing.token")
    with pytest.raises(ValueError, match=f"--token_file={missing}: cannot read the file"):
        Client("127.0.0.1:1", token_file=missing)


@pytest.fixture(scope="module")
def https_server(
    tensord_binary: str, tmp_path_factory: pytest.TempPathFactory, pki: Path
) -> Iterator[Tensord]:
    """tls_server's settings with the v2 HTTP API on: HTTPS, mutual TLS, tokens."""
    yield from _serve(
        tensord_binary, tmp_path_factory, "tensord-https",
        f"--tls_cert_file={pki / 'server.crt'}", f"--tls_key_file={pki / 'server.key'}",
        f"--tls_client_ca_file={pki / 'ca.crt'}", f"--auth_token_file={pki / 'tokens'}",
        "--http_address=127.0.0.1:0",
    )


def _http_slice(url: str, ssl_options: dict[str, str]) -> np.ndarray:
    import tritonclient.http as triton

    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    inputs = [triton.InferInput("input", [4, 4], "FP32")]
    inputs[0].set_data_from_numpy(x, binary_data=False)
    for name, values in (("offsets", [0, 1]), ("window_sizes", [4, 3]),
                         ("window_strides", [2, 2])):
        item = triton.InferInput(name, [2], "INT64")
        item.set_data_from_numpy(np.array(values, dtype=np.int64), binary_data=False)
        inputs.append(item)
    client = triton.InferenceServerClient(url, ssl=True, ssl_options=ssl_options,
                                          network_timeout=60)
    try:
        config = client.get_model_config("slice", headers={"Authorization": f"Bearer {TOKEN}"})
        assert [i["name"] for i in config["input"]][0] == "input"
        result = client.infer("slice", inputs, headers={"Authorization": f"Bearer {TOKEN}"},
                              parameters={"backend": "cpu"})
        return result.as_numpy("output")
    finally:
        client.close()


def test_tritonclient_grpc_over_mutual_tls_with_a_token(tls_server: Tensord, pki: Path) -> None:
    """Triton's gRPC client over mutual TLS with a token: the model config, then a
    slice built from it."""
    import tritonclient.grpc as triton

    client = triton.InferenceServerClient(
        tls_server.address, ssl=True, root_certificates=str(pki / "ca.crt"),
        private_key=str(pki / "client.key"), certificate_chain=str(pki / "client.crt"))
    headers = {"authorization": f"Bearer {TOKEN}"}
    try:
        config = client.get_model_config("slice", headers=headers, as_json=True)["config"]
        assert [(i["name"], i["data_type"]) for i in config["input"]] == [
            ("input", "TYPE_FP32"), ("offsets", "TYPE_INT64"), ("window_sizes", "TYPE_INT64"),
            ("window_strides", "TYPE_INT64")]
        x = np.arange(16, dtype=np.float32).reshape(4, 4)
        values = {"offsets": [0, 1], "window_sizes": [4, 3], "window_strides": [2, 2]}
        inputs = []
        for spec in config["input"]:
            array = x if spec["name"] == "input" else np.array(values[spec["name"]], np.int64)
            item = triton.InferInput(spec["name"], list(array.shape), spec["data_type"][5:])
            item.set_data_from_numpy(array)
            inputs.append(item)
        result = client.infer("slice", inputs, headers=headers)
        np.testing.assert_array_equal(result.as_numpy("output"), [[1, 3], [9, 11]])
    finally:
        client.close()


def test_tritonclient_http_over_https_with_mutual_tls(https_server: Tensord, pki: Path) -> None:
    options = {"ca_certs": str(pki / "ca.crt"), "certfile": str(pki / "client.crt"),
               "keyfile": str(pki / "client.key")}
    np.testing.assert_array_equal(_http_slice(https_server.http_address, options),
                                  [[1, 3], [9, 11]])
    # Without a client certificate the handshake is refused: a transport error
    # (the server closed the connection), not an HTTP answer.
    from tritonclient.utils import InferenceServerException

    with pytest.raises(Exception) as error:
        _http_slice(https_server.http_address, {"ca_certs": str(pki / "ca.crt")})
    assert not isinstance(error.value, InferenceServerException) or error.value.status() is None
