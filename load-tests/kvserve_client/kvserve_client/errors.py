"""Typed errors: kvserve's status codes (proto/kvserve/v1/generation.proto) as exception classes,
so a caller can `except ResourceExhausted` (queue full, or a request the KV pool can never hold)
instead of comparing grpc status codes."""
import grpc


class KvserveError(Exception):
    """A failed call. `code` is the grpc.StatusCode, `details` the server's message."""

    def __init__(self, code, details):
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details


class InvalidArgument(KvserveError):
    """A malformed request; the message names the field and the value."""


class ResourceExhausted(KvserveError):
    """The waiting queue is full, or the request can never fit the KV pool."""


class Unavailable(KvserveError):
    """The server is loading, draining, or cannot be reached."""


class DeadlineExceeded(KvserveError):
    """The call's timeout ran out before the server answered."""


class Cancelled(KvserveError):
    """The call was cancelled (by the client, or the server went away)."""


class Unauthenticated(KvserveError):
    """No valid API key: pass api_key= (or set KVSERVE_API_KEY) for a server run with --api-key-file."""


_BY_CODE = {
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.CANCELLED: Cancelled,
}


def from_rpc_error(err):
    """The typed error for a grpc.RpcError (sync) or grpc.aio.AioRpcError."""
    code = err.code()
    return _BY_CODE.get(code, KvserveError)(code, err.details() or "")
