"""Builds a GenerateRequest from plain Python values, shared by the sync and asyncio clients."""
from ._pb import generation_pb2 as pb



def build_request(prompt=None, *, token_ids=None, messages=None, max_new_tokens=None, ignore_eos=False,
                  stop=None, stop_token_ids=None, kv=None, sampling=None, top_logprobs=0, request_id=""):
    """One prompt: exactly one of `prompt` (text), `token_ids`, `messages` ([(role, content)] or dicts).
    `kv` and `sampling` are dicts keyed by KvCacheParams / SamplingParams field names; None values
    are left unset so the server's defaults apply."""
    given = [x is not None for x in (prompt, token_ids, messages)]
    if sum(given) != 1:
        raise ValueError("give exactly one of prompt, token_ids, messages")
    p = pb.Prompt()
    if prompt is not None:
        p.text = prompt
    elif token_ids is not None:
        p.token_ids.extend(int(t) for t in token_ids)
    else:
        for m in messages:
            role, content = (m["role"], m["content"]) if isinstance(m, dict) else m
            p.messages.add(role=role, content=content)
    req = pb.GenerateRequest(request_id=request_id, prompts=[p])
    if max_new_tokens is not None:
        req.stopping.max_new_tokens = int(max_new_tokens)
    req.stopping.ignore_eos = bool(ignore_eos)
    req.stopping.stop_sequences.extend(stop or [])
    req.stopping.stop_token_ids.extend(stop_token_ids or [])
    req.logprobs.top_logprobs = int(top_logprobs)
    _fill(req.kv, kv or {}, "kv")
    _fill(req.sampling, sampling or {}, "sampling")
    return req


def _fill(msg, values, what):
    """Fields by their proto names, read off the generated descriptor, so a field added to the
    proto is usable as soon as the client is reinstalled."""
    fields = msg.DESCRIPTOR.fields_by_name
    for key, value in values.items():
        if key not in fields:
            raise ValueError(f"unknown {what} field {key!r} (known: {', '.join(sorted(fields))})")
        if value is None:
            continue
        current = getattr(msg, key)
        if hasattr(current, "extend"):  # a repeated field (the descriptor API for this moved across protobuf versions)
            current.extend(value)
        else:
            setattr(msg, key, value)
