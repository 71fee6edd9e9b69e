"""What peers reported about their TLS files, checked against ours: each test names the report
(repo#number) and the value we expect for the same file in an SSLConfig.

The files are made at test time (tests.serving.test_tls's helpers): a root CA, an intermediate
CA it signed, a server certificate the intermediate signed (leaf first in server_cert, as RFC
5246 asks), and two client CAs with a client each. "Served" is checked in this process, on both
ports' TLS: a gRPC server built from `grpc_credentials` (the health service, called by a stock
grpcio client that trusts only the root), and the REST port's `rest_ssl_context` over a socket
pair (Python's ssl client). No model server is started.
"""

import datetime
import socket
import ssl
import threading
from concurrent import futures

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from serving import ssl_config
from tests.serving.test_tls import PAST, _authority, _certificate, _issued, _pem_key, _text_proto

NAMES = {f: f for f, _, _ in ssl_config._FIELDS}


def _traditional(key) -> str:
    """`key` in OpenSSL's traditional form: PKCS#1 (BEGIN RSA PRIVATE KEY) or SEC 1 (BEGIN EC
    PRIVATE KEY)."""
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """ "root" (the CA clients trust), "intermediate" (PEM, signed by root), "key" / "leaf" (the
    server's, signed by the intermediate, SAN localhost), "intermediate_key" (to sign more
    leaves), "client_ca" / "client" and "client_ca_two" / "client_two" (PEM; client = (key,
    cert)), "files": name -> (cert path, key path) of the two clients."""
    root = _authority("root CA")
    intermediate_key = ec.generate_private_key(ec.SECP256R1())
    intermediate = _certificate("intermediate CA", intermediate_key, "root CA", root[1], ca=True)
    key, leaf = _issued(("intermediate CA", intermediate_key, intermediate), "localhost", True)
    one, two = _authority("client CA one"), _authority("client CA two")
    made = {
        "root": root[2],
        "root_authority": root,
        "intermediate": intermediate,
        "intermediate_key": intermediate_key,
        "key": key,
        "leaf": leaf,
        "client_ca": one[2],
        "client": _issued(one, "client one"),
        "client_ca_two": two[2],
        "client_two": _issued(two, "client two"),
        "files": {},
    }
    folder = tmp_path_factory.mktemp("peer_pki")
    for name in ("client", "client_two"):
        (folder / f"{name}.key").write_text(made[name][0])
        (folder / f"{name}.crt").write_text(made[name][1])
        made["files"][name] = (str(folder / f"{name}.crt"), str(folder / f"{name}.key"))
    return made


def _leaf(chain, key) -> str:
    """A server certificate for localhost with `key`, signed by the intermediate."""
    return _certificate("localhost", key, "intermediate CA", chain["intermediate_key"], server=True)


def _config(key, cert, custom_ca="", client_verify=False):
    return ssl_config.ssl_config_message()(
        server_key=key, server_cert=cert, custom_ca=custom_ca, client_verify=client_verify
    )


def _written(tmp_path, config) -> str:
    """`config` written as the command writes it; its path."""
    path = tmp_path / "ssl.config"
    ssl_config.write_ssl_config(config, str(path))
    return str(path)


def _grpc_status(config, trust, client=None) -> str:
    """What a stock grpcio client trusting `trust` (PEM), with the (key, cert) `client`, gets
    from a gRPC server on `config`'s credentials: "SERVING", the status code's name, or
    "cannot bind" when the server cannot use the credentials at all."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    try:
        port = server.add_secure_port("127.0.0.1:0", ssl_config.grpc_credentials(config))
    except RuntimeError:  # grpcio: "Failed to bind to address ..."
        return "cannot bind"
    if not port:
        return "cannot bind"
    server.start()
    try:
        identity = (client[0].encode(), client[1].encode()) if client else (None, None)
        credentials = grpc.ssl_channel_credentials(trust.encode(), *identity)
        with grpc.secure_channel(f"localhost:{port}", credentials) as channel:
            try:
                response = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(), timeout=10
                )
            except grpc.RpcError as e:
                return e.code().name
        return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
    finally:
        server.stop(0)


def _rest_accepts(config, trust, client_files=None) -> bool:
    """Whether a Python ssl client trusting `trust`, with the certificate files `client_files`,
    completes a TLS exchange with the REST port's context for `config` (over a socket pair)."""
    server_end, client_end = socket.socketpair()
    server_end.settimeout(10)
    client_end.settimeout(10)
    server_context = ssl_config.rest_ssl_context(config)

    def serve():
        try:
            with server_context.wrap_socket(server_end, server_side=True) as tls:
                if tls.recv(1) == b"x":
                    tls.sendall(b"y")
        except OSError:  # ssl.SSLError included: the handshake was refused
            pass
        finally:
            server_end.close()

    thread = threading.Thread(target=serve)
    thread.start()
    context = ssl.create_default_context(cadata=trust)
    if client_files:
        context.load_cert_chain(*client_files)
    try:
        with context.wrap_socket(client_end, server_hostname="localhost") as tls:
            tls.sendall(b"x")
            return tls.recv(1) == b"y"
    except OSError:
        return False
    finally:
        client_end.close()
        thread.join(10)


# ---------------------------------------------------------------- chains
def test_a_chain_leaf_first_with_its_intermediate_serves_clients_that_trust_only_the_root(
    tmp_path, chain
):
    """neutrinolabs/xrdp#201 (and dotnet/corefx#35640: RFC 5246 order): the server certificate
    first, then the intermediate that signed it. Expected: read as is, the summary counts 2
    certificates in the chain, and both ports serve a client that trusts only the root."""
    config = _config(chain["key"], chain["leaf"] + chain["intermediate"])
    read = ssl_config.read_ssl_config(_written(tmp_path, config))
    assert read.server_cert == chain["leaf"] + chain["intermediate"]
    assert "; 2 certificates in the chain)" in ssl_config.summary(read, "out")
    assert _grpc_status(read, chain["root"]) == "SERVING"
    assert _rest_accepts(read, chain["root"]) is True


def test_a_chain_in_the_wrong_order_is_refused_as_a_key_mismatch(tmp_path, chain):
    """tor2web/Tor2web#155: `cat intermediate.crt server.crt` put the intermediate first and
    OpenSSL said "key values mismatch". Expected: the one line naming the mismatch."""
    path = _written(tmp_path, _config(chain["key"], chain["intermediate"] + chain["leaf"]))
    with pytest.raises(ssl_config.SSLConfigError) as info:
        ssl_config.read_ssl_config(path)
    assert str(info.value) == (
        f"--ssl_config_file {path}: server_key does not match server_cert (its first "
        "certificate is for another key)"
    )


def test_a_chain_in_the_wrong_order_is_refused_without_a_warning_about_the_intermediate(
    tmp_path, chain, caplog
):
    """tor2web/Tor2web#155, continued. Expected: the refusal is the only output; no warning line
    about a missing subjectAltName (the server certificate has one; the CA does not need one)."""
    path = _written(tmp_path, _config(chain["key"], chain["intermediate"] + chain["leaf"]))
    with caplog.at_level("WARNING", logger="serving"):
        with pytest.raises(ssl_config.SSLConfigError):
            ssl_config.read_ssl_config(path)
    assert [r.getMessage() for r in caplog.records] == []


def test_an_expired_intermediate_in_the_chain_is_refused_by_name(tmp_path, chain):
    """testssl/testssl.sh#1683 (and smallstep/certificates#670: refuse to start): a valid server
    certificate sent with an intermediate that expired. Expected: refused, naming the
    intermediate and when it expired."""
    root = chain["root_authority"]
    old_key = ec.generate_private_key(ec.SECP256R1())
    old = _certificate("old intermediate", old_key, "root CA", root[1], ca=True, valid=PAST)
    key, leaf = _issued(("old intermediate", old_key, old), "localhost", server=True)
    path = _written(tmp_path, _config(key, leaf + old))
    with pytest.raises(ssl_config.SSLConfigError) as info:
        ssl_config.read_ssl_config(path)
    assert str(info.value) == (
        f"--ssl_config_file {path}: server_cert holds a certificate (CN=old intermediate) that "
        "expired on 2020-01-02 03:04:05 UTC"
    )


def test_a_combined_pem_of_key_certificate_and_chain_serves_as_both_files(tmp_path, chain):
    """processone/ejabberd#2850: the private key, the certificate and the CA bundle concatenated
    into one .pem file. Expected: the same file given as --server_key and --server_cert is
    written and served (OpenSSL and gRPC take the key and the chain out of it)."""
    combined = tmp_path / "combined.pem"
    combined.write_text(chain["key"] + chain["leaf"] + chain["intermediate"])
    config = ssl_config.build_ssl_config(str(combined), str(combined))
    read = ssl_config.read_ssl_config(_written(tmp_path, config))
    assert "; 2 certificates in the chain)" in ssl_config.summary(read, "out")
    assert _grpc_status(read, chain["root"]) == "SERVING"
    assert _rest_accepts(read, chain["root"]) is True


def test_a_chain_glued_end_to_begin_is_read_alike_by_the_check_and_both_ports(tmp_path, chain):
    """zenhack/simp_le#149 (and pomerium/pomerium#5645): `cat cert.pem chain.pem` where cert.pem
    lacks its final newline gives "-----END CERTIFICATE----------BEGIN CERTIFICATE-----", which
    OpenSSL alone refuses and cryptography's reader takes. Expected: one reading for all three:
    the check, gRPC and REST read the same two blocks (`_pem_blocks`), and both ports send the
    whole chain (a client that trusts only the root is served)."""
    glued = chain["leaf"].rstrip("\n") + chain["intermediate"]
    read = ssl_config.read_ssl_config(_written(tmp_path, _config(chain["key"], glued)))
    assert "; 2 certificates in the chain)" in ssl_config.summary(read, "out")
    assert _grpc_status(read, chain["root"]) == "SERVING"
    assert _rest_accepts(read, chain["root"]) is True


def test_a_ca_bundle_glued_end_to_begin_is_refused_or_loaded_by_grpc(tmp_path, chain):
    """pomerium/pomerium#5645 (and zenhack/simp_le#149), in custom_ca: two client CAs
    concatenated where the first lacks its final newline. Expected: what read_ssl_config takes,
    the gRPC port takes too (both clients served), or read_ssl_config refuses it naming
    custom_ca."""
    bundle = chain["client_ca"].rstrip("\n") + chain["client_ca_two"]
    path = _written(
        tmp_path, _config(chain["key"], chain["leaf"] + chain["intermediate"], bundle, True)
    )
    try:
        read = ssl_config.read_ssl_config(path)
    except ssl_config.SSLConfigError as e:
        assert str(e).startswith(f"--ssl_config_file {path}: custom_ca ")
        return
    assert _grpc_status(read, chain["root"], chain["client"]) == "SERVING"
    assert _grpc_status(read, chain["root"], chain["client_two"]) == "SERVING"


# ---------------------------------------------------------------- PEM text around the blocks
def _crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


def test_crlf_pem_files_and_a_crlf_config_file_are_served(tmp_path, chain):
    """processone/ejabberd#2850 (title: the PEM decoder did not support CRLF) and
    libp2p/go-openssl#10: PEM files saved on Windows. Expected: the command writes them as
    they are, and a hand-written config whose own lines end in CRLF reads the same; both ports
    serve mutual TLS."""
    files = {}
    for name, text in (
        ("cert", chain["leaf"] + chain["intermediate"]),
        ("key", chain["key"]),
        ("ca", chain["client_ca"]),
    ):
        files[name] = tmp_path / f"{name}.pem"
        files[name].write_bytes(_crlf(text).encode())
    config = ssl_config.build_ssl_config(
        str(files["cert"]), str(files["key"]), str(files["ca"]), client_verify=True
    )
    assert config.server_key == _crlf(chain["key"])
    read = ssl_config.read_ssl_config(_written(tmp_path, config))
    assert read == config
    assert _grpc_status(read, chain["root"], chain["client"]) == "SERVING"
    assert _rest_accepts(read, chain["root"], chain["files"]["client"]) is True
    pki = {
        "server": (chain["key"], chain["leaf"] + chain["intermediate"]),
        "ca": chain["client_ca"],
    }
    by_hand = tmp_path / "by_hand.config"
    by_hand.write_bytes(_crlf(_text_proto(pki, client_verify=True)).encode())
    assert ssl_config.read_ssl_config(str(by_hand)) == _config(
        chain["key"], chain["leaf"] + chain["intermediate"], chain["client_ca"], True
    )


BAG_KEY = "Bag Attributes\n    friendlyName: alias\n    localKeyID: 9E 53 61 FD\nKey Attributes: <No Attributes>\n"
BAG_CERT = (
    "Bag Attributes\n    friendlyName: alias\nsubject=CN = localhost\nissuer=CN = intermediate CA\n"
)


def test_bag_attributes_around_the_blocks_are_skipped(tmp_path, chain):
    """rusticata/x509-parser#21 (and digitalbazaar/forge#242): `openssl pkcs12 -nodes` writes
    "Bag Attributes" / "subject=" lines before each block. Expected: read and served on both
    ports, the chain still 2 certificates."""
    config = _config(
        BAG_KEY + chain["key"],
        BAG_CERT + chain["leaf"] + "subject=CN = intermediate CA\n" + chain["intermediate"],
    )
    read = ssl_config.read_ssl_config(_written(tmp_path, config))
    assert "; 2 certificates in the chain)" in ssl_config.summary(read, "out")
    assert _grpc_status(read, chain["root"]) == "SERVING"
    assert _rest_accepts(read, chain["root"]) is True


@pytest.mark.parametrize(
    "report, change",
    [
        ("fedora-infra/fedora-messaging#590", lambda text: text.rstrip("\n")),
        ("smallstep/cli#1002", lambda text: "\n\n" + text),
    ],
    ids=["no-final-newline", "leading-blank-lines"],
)
def test_pem_without_a_final_newline_or_with_leading_blank_lines_is_served(
    tmp_path, chain, report, change
):
    """fedora-infra/fedora-messaging#590: PEM files without a trailing newline;
    smallstep/cli#1002: a PEM starting with blank lines. Expected, each in all three fields:
    read, and both ports serve mutual TLS to a client of the (changed) CA."""
    config = _config(
        change(chain["key"]),
        change(chain["leaf"] + chain["intermediate"]),
        change(chain["client_ca"]),
        True,
    )
    read = ssl_config.read_ssl_config(_written(tmp_path, config))
    assert _grpc_status(read, chain["root"], chain["client"]) == "SERVING", report
    assert _rest_accepts(read, chain["root"], chain["files"]["client"]) is True, report


def _trusted_by_both_ports(config, chain, client) -> tuple:
    return (
        _grpc_status(config, chain["root"], chain[client]) == "SERVING",
        _rest_accepts(config, chain["root"], chain["files"][client]),
    )


def test_non_ascii_comment_lines_in_a_ca_bundle_trust_every_ca_on_both_ports(tmp_path, chain):
    """nabla-c0d3/sslyze#670 (and posit-dev/rsconnect-python#177): a CA bundle with comment
    lines naming CAs with accents ("# NetLock Arany (Class Gold) Főtanúsítvány"). Expected:
    read, and both ports take clients of each CA in it."""
    bundle = (
        "# client CA one: Zürich\n"
        + chain["client_ca"]
        + "\n# NetLock Arany (Class Gold) Főtanúsítvány\n"
        + chain["client_ca_two"]
    )
    config = _config(chain["key"], chain["leaf"] + chain["intermediate"], bundle, True)
    read = ssl_config.read_ssl_config(_written(tmp_path, config))
    assert _trusted_by_both_ports(read, chain, "client") == (True, True)
    assert _trusted_by_both_ports(read, chain, "client_two") == (True, True)


@pytest.mark.parametrize("prefix", ["\ufeff", "  "], ids=["byte-order-mark", "indented"])
def test_a_ca_block_that_does_not_start_a_line_is_trusted_alike_on_both_ports(
    tmp_path, chain, prefix
):
    """ManageIQ/manageiq#13721 (review: anchor -----BEGIN at the start of a line): a bundle made
    with `cat` from a file saved with a byte-order mark, or pasted indented. Expected: the REST
    and gRPC ports agree on every client (or read_ssl_config refuses the bundle naming
    custom_ca); here the second CA's client is taken by REST and refused by gRPC."""
    bundle = chain["client_ca"] + prefix + chain["client_ca_two"]
    path = _written(
        tmp_path, _config(chain["key"], chain["leaf"] + chain["intermediate"], bundle, True)
    )
    try:
        read = ssl_config.read_ssl_config(path)
    except ssl_config.SSLConfigError as e:
        assert str(e).startswith(f"--ssl_config_file {path}: custom_ca ")
        return
    grpc_ok, rest_ok = _trusted_by_both_ports(read, chain, "client_two")
    assert grpc_ok == rest_ok


def _tab_indented(pem: str) -> str:
    return "".join("\t" + line + "\n" for line in pem.splitlines())


def test_a_tab_indented_intermediate_is_sent_or_refused(tmp_path, chain):
    """membrane/api-gateway#2266: raw PEM indented with tabs. Expected, for an intermediate
    indented so in server_cert: read_ssl_config refuses it naming server_cert, or both ports
    serve a client that trusts only the root."""
    config = _config(chain["key"], chain["leaf"] + _tab_indented(chain["intermediate"]))
    path = _written(tmp_path, config)
    try:
        read = ssl_config.read_ssl_config(path)
    except ssl_config.SSLConfigError as e:
        assert str(e).startswith(f"--ssl_config_file {path}: server_cert ")
        return
    assert _grpc_status(read, chain["root"]) == "SERVING"
    assert _rest_accepts(read, chain["root"]) is True


def test_a_tab_indented_ca_block_is_trusted_alike_on_both_ports(tmp_path, chain):
    """membrane/api-gateway#2266, in custom_ca: a tab-indented CA block, which OpenSSL refused
    ("bad end line", blamed on server_key and server_cert) while the check read it. Expected:
    one reading for the check and both ports (`_pem_blocks` strips each line): both CAs'
    clients served on gRPC and REST."""
    bundle = chain["client_ca"] + _tab_indented(chain["client_ca_two"])
    path = _written(
        tmp_path, _config(chain["key"], chain["leaf"] + chain["intermediate"], bundle, True)
    )
    read = ssl_config.read_ssl_config(path)
    assert _trusted_by_both_ports(read, chain, "client") == (True, True)
    assert _trusted_by_both_ports(read, chain, "client_two") == (True, True)


def test_a_ca_bundle_that_cannot_be_read_is_named_as_custom_ca(tmp_path, chain):
    """membrane/api-gateway#2266: the line names the field to fix. A CA block whose body is not
    base64 is refused naming custom_ca, not server_key and server_cert (which are fine)."""
    broken = "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n"
    path = _written(
        tmp_path,
        _config(
            chain["key"], chain["leaf"] + chain["intermediate"], chain["client_ca"] + broken, True
        ),
    )
    with pytest.raises(ssl_config.SSLConfigError) as info:
        ssl_config.read_ssl_config(path)
    assert str(info.value).startswith(f"--ssl_config_file {path}: custom_ca "), str(info.value)


# ---------------------------------------------------------------- key forms and curves
@pytest.mark.parametrize("form", ["PKCS#1", "PKCS#8"])
def test_rsa_keys_in_pkcs1_and_pkcs8_form_are_both_served(tmp_path, chain, form):
    """sshnet/SSH.NET#1090 and h2o/picotls#511 (one form refused, the other taken; OpenSSL 3
    writes PKCS#8, `-traditional` PKCS#1). Expected: each form read and served on both ports."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = _traditional(key) if form == "PKCS#1" else _pem_key(key)
    assert pem.startswith(
        "-----BEGIN RSA PRIVATE KEY-----" if form == "PKCS#1" else "-----BEGIN PRIVATE KEY-----"
    )
    read = ssl_config.read_ssl_config(
        _written(tmp_path, _config(pem, _leaf(chain, key) + chain["intermediate"]))
    )
    assert _grpc_status(read, chain["root"]) == "SERVING"
    assert _rest_accepts(read, chain["root"]) is True


EC_PARAMETERS_P384 = "-----BEGIN EC PARAMETERS-----\nBgUrgQQAIg==\n-----END EC PARAMETERS-----\n"


def test_an_ec_key_after_its_ec_parameters_block_is_served(tmp_path, chain):
    """phpseclib/phpseclib#1520: `openssl ecparam -genkey` writes an EC PARAMETERS block before
    the EC PRIVATE KEY block; OpenSSL reads it. Expected: read and served on both ports."""
    key = ec.generate_private_key(ec.SECP384R1())
    pem = EC_PARAMETERS_P384 + _traditional(key)
    read = ssl_config.read_ssl_config(
        _written(tmp_path, _config(pem, _leaf(chain, key) + chain["intermediate"]))
    )
    assert read.server_key == pem
    assert _grpc_status(read, chain["root"]) == "SERVING"
    assert _rest_accepts(read, chain["root"]) is True


def test_a_p384_key_is_served(tmp_path, chain):
    """elastic/elasticsearch#54975 (P-384 certificates unusable; #55031 the handshake failing
    for EC keys). Expected: a P-384 key in PKCS#8 read and served on both ports."""
    key = ec.generate_private_key(ec.SECP384R1())
    read = ssl_config.read_ssl_config(
        _written(tmp_path, _config(_pem_key(key), _leaf(chain, key) + chain["intermediate"]))
    )
    assert _grpc_status(read, chain["root"]) == "SERVING"
    assert _rest_accepts(read, chain["root"]) is True


def test_a_p521_key_that_stock_grpc_clients_refuse_is_warned_about(tmp_path, chain, caplog):
    """grpc/grpc#6722 (BAD_ECC_CERT: gRPC's TLS limited to some curves). A P-521 key: OpenSSL
    clients handshake, a grpcio client does not. Expected: taken with one warning line naming
    server_cert and the curve, as for a certificate without a subjectAltName."""
    key = ec.generate_private_key(ec.SECP521R1())
    path = _written(tmp_path, _config(_pem_key(key), _leaf(chain, key) + chain["intermediate"]))
    with caplog.at_level("WARNING", logger="serving"):
        read = ssl_config.read_ssl_config(path)
    assert _rest_accepts(read, chain["root"]) is True
    assert _grpc_status(read, chain["root"]) == "UNAVAILABLE"
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and "server_cert" in messages[0] and "secp521r1" in messages[0]


# ---------------------------------------------------------------- names and fields
def _server_certificate(chain, san, valid=None):
    """(key PEM, certificate PEM) for CN=localhost signed by the root, with the subjectAltName
    entries `san` (None: no extension), valid over `valid` (default from 5 minutes ago)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    not_before, not_after = valid or (
        now - datetime.timedelta(minutes=5),
        now + datetime.timedelta(days=1),
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "root CA")]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
    )
    if san is not None:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    root_key = chain["root_authority"][1]
    return _pem_key(key), builder.sign(root_key, hashes.SHA256()).public_bytes(
        serialization.Encoding.PEM
    ).decode()


def test_a_subject_alt_name_without_dns_names_or_addresses_is_warned_about(tmp_path, chain, caplog):
    """golang/go#22922 (a SAN with an e-mail address and no DNS name: "certificate is not valid
    for any names"). Expected: taken with one warning line naming server_cert, as for a
    certificate with no subjectAltName."""
    key, cert = _server_certificate(chain, [x509.RFC822Name("ops@example.com")])
    path = _written(tmp_path, _config(key, cert))
    with caplog.at_level("WARNING", logger="serving"):
        read = ssl_config.read_ssl_config(path)
    assert _grpc_status(read, chain["root"]) == "UNAUTHENTICATED"
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and messages[0].startswith("server_cert "), messages


def test_a_certificate_minted_on_a_clock_ahead_is_refused_until_it_is_valid(chain):
    """skupperproject/skupper#456 (and geteduroam/linux-app#69): a certificate whose notBefore
    is a few seconds ahead of this machine's clock. Expected: refused naming the time it
    becomes valid, and taken from that time on."""
    start = datetime.datetime(2030, 5, 6, 7, 8, 9, tzinfo=datetime.timezone.utc)
    valid = (start, start + datetime.timedelta(days=30))
    key, cert = _server_certificate(chain, [x509.DNSName("localhost")], valid)
    config = _config(key, cert)
    with pytest.raises(ssl_config.SSLConfigError) as info:
        ssl_config.check_tls(config, NAMES, now=start - datetime.timedelta(seconds=30))
    assert str(info.value) == (
        "server_cert holds a certificate (CN=localhost) that is not valid until "
        "2030-05-06 07:08:09 UTC"
    )
    ssl_config.check_tls(config, NAMES, now=start + datetime.timedelta(seconds=1))


def test_a_windows_file_path_in_custom_ca_names_the_command(tmp_path, chain):
    """grpc/grpc#4689: file names given where gRPC wants the PEM contents ("You have to provide
    the contents of the files, not the file names"). Expected, for a Windows path in
    custom_ca: one line naming it and the command that writes the file right."""
    path = tmp_path / "ssl.config"
    pki = {"server": (chain["key"], chain["leaf"]), "ca": ""}
    path.write_text(_text_proto(pki, client_verify=True, custom_ca="C:\\\\certs\\\\client-ca.pem"))
    with pytest.raises(ssl_config.SSLConfigError) as info:
        ssl_config.read_ssl_config(str(path))
    assert str(info.value) == (
        f"--ssl_config_file {path}: custom_ca looks like a file path (C:\\certs\\client-ca.pem); "
        "SSLConfig holds the PEM text itself: write this file with python -m serving.ssl_config "
        "--server_cert=CERT.pem --server_key=KEY.pem --custom_ca=C:\\certs\\client-ca.pem "
        f"--client_verify --output={path}"
    )


def test_a_hand_written_config_in_single_quotes_with_an_rsa_key_reads(tmp_path, chain):
    """tensorflow/serving#193 (the SSLConfig users wrote by hand: server_key:'-----BEGIN RSA
    PRIVATE KEY-----\\n...' in single quotes). Expected: read, the fields the PEM texts."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem, cert = _traditional(key), _leaf(chain, key) + chain["intermediate"]
    path = tmp_path / "ssl.config"
    path.write_text(
        "server_key:'" + pem.replace("\n", "\\n") + "'\n"
        "server_cert:'" + cert.replace("\n", "\\n") + "'\n"
        "client_verify:false\n"
    )
    read = ssl_config.read_ssl_config(str(path))
    assert (read.server_key, read.server_cert, read.custom_ca, read.client_verify) == (
        pem,
        cert,
        "",
        False,
    )


def test_a_key_without_its_certificate_is_one_line(tmp_path, chain):
    """grpc/grpc#40732 (a key-cert pair missing its certificate crashed the interpreter in C).
    Expected: one line naming the empty field."""
    path = tmp_path / "ssl.config"
    path.write_text('server_key: "' + chain["key"].replace("\n", "\\n") + '"\n')
    with pytest.raises(ssl_config.SSLConfigError) as info:
        ssl_config.read_ssl_config(str(path))
    assert str(info.value) == (
        f"--ssl_config_file {path}: server_cert empty (give the PEM text itself)"
    )
