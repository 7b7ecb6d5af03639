"""Certificates for the suites' TLS tests, made with the openssl command in
a directory the caller owns: never committed, valid for two days."""
import os
import subprocess


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_cert(d, name, cn, ca, ext=None):
    """name.key and name.crt (EC P-256), signed by ca's (or self-signed
    when ca is None); ext: an extension line such as
    "subjectAltName=IP:127.0.0.1"."""
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
           "-keyout", name + ".key", "-subj", "/CN=" + cn]
    if ca is None:
        openssl("req", "-x509", *key, "-out", name + ".crt", "-days", "2", cwd=d)
        return
    openssl("req", *key, "-out", name + ".csr", cwd=d)
    extra = []
    if ext:
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write(ext + "\n")
        extra = ["-extfile", name + ".ext"]
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
            "-CAcreateserial", "-out", name + ".crt", "-days", "2", *extra, cwd=d)


def make_pki(d):
    """A CA, a server certificate for 127.0.0.1 and localhost, a client's
    and a second CA nobody trusts: ca, server, client, other-ca."""
    make_cert(d, "ca", "Bloomery test CA", None)
    make_cert(d, "server", "localhost", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost")
    make_cert(d, "client", "loader", "ca", "extendedKeyUsage=clientAuth")
    make_cert(d, "other-ca", "Another CA", None)
