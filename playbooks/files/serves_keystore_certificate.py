"""Does the TLS port on 127.0.0.1 serve the leaf certificate of this host's key store file?
argv: key store PEM (key and chain), CA bundle, port. Connects with the same key and
certificate as client identity (the listeners require client certificates); exits 0
when the served certificate is the file's, else 1. Run on the host by the rotation plays."""

import socket
import ssl
import sys

BEGIN, END = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"


def main(pem: str, ca: str, port: int) -> int:
    with open(pem) as file:
        text = file.read()
    leaf = ssl.PEM_cert_to_DER_cert(BEGIN + text.split(BEGIN, 1)[1].split(END, 1)[0] + END + "\n")
    context = ssl.create_default_context(cafile=ca)
    context.check_hostname = False
    context.load_cert_chain(pem)
    with (socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
          context.wrap_socket(raw) as tls):
        served = tls.getpeercert(binary_form=True)
    same = served == leaf
    print("the port serves the file's certificate" if same
          else "the port still serves another certificate")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
