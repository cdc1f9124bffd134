"""What both clients share about connecting: channel options, TLS credentials and the API key.

TLS is used when `tls` is set or any PEM is given: `root_certificates` (the server's CA; None:
the system roots) and, for mutual TLS, `certificate_chain` with `private_key`. The API key
(`api_key`, else $KVSERVE_API_KEY) goes with every call as `authorization: Bearer KEY`.
"""
import os

import grpc

# A 128K-token prompt as token ids is ~600 KB of proto; gRPC's default receive limit is 4 MiB,
# so responses never hit it, but say so explicitly for the send side.
OPTIONS = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]


def _read(pem):
    """PEM bytes from bytes or a file path."""
    if pem is None or isinstance(pem, bytes):
        return pem
    with open(pem, "rb") as f:
        return f.read()


def credentials(tls=False, root_certificates=None, certificate_chain=None, private_key=None):
    """grpc.ChannelCredentials, or None for a plaintext channel."""
    if (certificate_chain is None) != (private_key is None):
        raise ValueError("certificate_chain and private_key go together")
    if not (tls or root_certificates or certificate_chain):
        return None
    return grpc.ssl_channel_credentials(_read(root_certificates), _read(private_key), _read(certificate_chain))


def call_metadata(api_key=None):
    """The metadata each call carries: the bearer token, when there is one."""
    key = api_key if api_key is not None else os.environ.get("KVSERVE_API_KEY")
    return (("authorization", f"Bearer {key}"),) if key else ()
