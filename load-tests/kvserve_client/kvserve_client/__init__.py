"""kvserve's Python client (proto/kvserve/v1/generation.proto).

    from kvserve_client import Client
    with Client("127.0.0.1:50051", timeout=60) as c:
        done = c.generate("Hello", max_new_tokens=16, kv={"policy": "snapkv", "budget": 0.2})
        print(done.text, done.usage.peak_kv_bytes)

AsyncClient (kvserve_client.aio) has the same calls for asyncio; errors are KvserveError
subclasses (ResourceExhausted, InvalidArgument, Unavailable, DeadlineExceeded, Cancelled).
The messages are the generated protobuf classes, in kvserve_client.pb."""
from ._pb import generation_pb2 as pb
from .aio import AsyncClient
from .client import Client
from .errors import (Cancelled, DeadlineExceeded, InvalidArgument, KvserveError, ResourceExhausted,
                     Unauthenticated, Unavailable)
from .request import build_request

__all__ = ["AsyncClient", "Client", "KvserveError", "InvalidArgument", "ResourceExhausted", "Unavailable",
           "DeadlineExceeded", "Cancelled", "Unauthenticated", "build_request", "pb"]
