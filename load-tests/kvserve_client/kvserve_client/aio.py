"""The asyncio client: the same calls as Client, awaitable; generate_stream is an async iterator."""
import grpc

from ._pb import generation_pb2 as pb
from ._pb import generation_pb2_grpc as pb_grpc
from ._channel import OPTIONS, call_metadata, credentials
from .errors import from_rpc_error
from .request import build_request


class AsyncClient:
    """`async with AsyncClient(addr) as c: completion = await c.generate("Hi", max_new_tokens=8)`.
    Create it inside the running event loop (grpc.aio binds the channel to it)."""

    def __init__(self, addr, timeout=None, *, api_key=None, tls=False, root_certificates=None,
                 certificate_chain=None, private_key=None):
        creds = credentials(tls, root_certificates, certificate_chain, private_key)
        self.channel = (grpc.aio.secure_channel(addr, creds, options=OPTIONS) if creds
                        else grpc.aio.insecure_channel(addr, options=OPTIONS))
        self.metadata = call_metadata(api_key)
        self.stub = pb_grpc.GenerationStub(self.channel)
        self.timeout = timeout

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def close(self):
        await self.channel.close()

    async def _call(self, method, request, timeout):
        try:
            return await method(request, timeout=self.timeout if timeout is None else timeout, metadata=self.metadata)
        except grpc.aio.AioRpcError as err:
            raise from_rpc_error(err) from None

    async def generate(self, prompt=None, *, timeout=None, **kw):
        response = await self._call(self.stub.Generate, build_request(prompt, **kw), timeout)
        return response.completions[0]

    async def generate_stream(self, prompt=None, *, timeout=None, **kw):
        """Async-iterates GenerateStreamResponse messages: `chunk` ones, then one `complete`."""
        call = self.stub.GenerateStream(build_request(prompt, **kw), timeout=self.timeout if timeout is None else timeout,
                                        metadata=self.metadata)
        try:
            async for message in call:
                yield message
        except grpc.aio.AioRpcError as err:
            raise from_rpc_error(err) from None
        finally:
            call.cancel()

    async def tokenize(self, text=None, *, messages=None, add_special_tokens=False, timeout=None):
        req = pb.TokenizeRequest(text=text or "", add_special_tokens=add_special_tokens)
        for role, content in messages or []:
            req.messages.add(role=role, content=content)
        return list((await self._call(self.stub.Tokenize, req, timeout)).token_ids)

    async def detokenize(self, token_ids, *, skip_special_tokens=False, timeout=None):
        req = pb.DetokenizeRequest(token_ids=token_ids, skip_special_tokens=skip_special_tokens)
        return (await self._call(self.stub.Detokenize, req, timeout)).text

    async def model_info(self, timeout=None):
        return await self._call(self.stub.GetModelInfo, pb.GetModelInfoRequest(), timeout)
