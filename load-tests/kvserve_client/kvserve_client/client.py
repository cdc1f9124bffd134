"""The blocking client: one channel, the five Generation RPCs, errors raised as typed exceptions."""
import grpc

from ._channel import OPTIONS, call_metadata, credentials
from ._pb import generation_pb2 as pb
from ._pb import generation_pb2_grpc as pb_grpc
from .errors import from_rpc_error
from .request import build_request



class Client:
    """`Client("127.0.0.1:50051")`; use as a context manager or call close(). `timeout` is the
    per-call deadline in seconds (None: no deadline)."""

    def __init__(self, addr, timeout=None, *, api_key=None, tls=False, root_certificates=None,
                 certificate_chain=None, private_key=None):
        creds = credentials(tls, root_certificates, certificate_chain, private_key)
        self.channel = (grpc.secure_channel(addr, creds, options=OPTIONS) if creds
                        else grpc.insecure_channel(addr, options=OPTIONS))
        self.metadata = call_metadata(api_key)
        self.stub = pb_grpc.GenerationStub(self.channel)
        self.timeout = timeout

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.channel.close()

    def _call(self, method, request, timeout):
        try:
            return method(request, timeout=self.timeout if timeout is None else timeout, metadata=self.metadata)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    def generate(self, prompt=None, *, timeout=None, **kw):
        """One prompt, unary: returns its Completion (text, token_ids, finish_reason, usage, timings)."""
        return self._call(self.stub.Generate, build_request(prompt, **kw), timeout).completions[0]

    def generate_stream(self, prompt=None, *, timeout=None, **kw):
        """Yields GenerateStreamResponse messages: `chunk` ones, then one `complete`."""
        call = self.stub.GenerateStream(build_request(prompt, **kw), timeout=self.timeout if timeout is None else timeout,
                                        metadata=self.metadata)
        try:
            yield from call
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None
        finally:
            call.cancel()  # a no-op after a clean end; frees the server's slot when the caller stops early

    def tokenize(self, text=None, *, messages=None, add_special_tokens=False, timeout=None):
        req = pb.TokenizeRequest(text=text or "", add_special_tokens=add_special_tokens)
        for role, content in messages or []:
            req.messages.add(role=role, content=content)
        return list(self._call(self.stub.Tokenize, req, timeout).token_ids)

    def detokenize(self, token_ids, *, skip_special_tokens=False, timeout=None):
        req = pb.DetokenizeRequest(token_ids=token_ids, skip_special_tokens=skip_special_tokens)
        return self._call(self.stub.Detokenize, req, timeout).text

    def model_info(self, timeout=None):
        return self._call(self.stub.GetModelInfo, pb.GetModelInfoRequest(), timeout)
