"""The served model's tokenizer, asked of the server under test, so prompts are sized in the
model's own tokens and sent as token ids: both servers then see exactly the same input."""
import json
import urllib.request


class KvserveTokenizer:
    def __init__(self, client):
        self.client = client
        info = client.model_info()
        self.model_id = info.model
        self.max_context = info.max_context
        self.vocab_size = info.vocab_size
        self.has_chat_template = info.has_chat_template

    def encode(self, text):
        return self.client.tokenize(text)

    def decode(self, ids):
        return self.client.detokenize(ids)

    def chat(self, text):
        """One user turn rendered with the model's chat template, or None without one."""
        if not self.has_chat_template:
            return None
        return self.client.tokenize(messages=[("user", text)], add_special_tokens=True)


class LlamaServerTokenizer:
    """llama-server's /tokenize and /detokenize; no chat rendering (prompts stay plain text)."""

    def __init__(self, base_url, max_context):
        self.base_url = base_url
        self.model_id = "llama-server"
        self.max_context = max_context
        self.vocab_size = None
        self.has_chat_template = False

    def _post(self, path, body):
        req = urllib.request.Request(self.base_url + path, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.load(r)

    def encode(self, text):
        return self._post("/tokenize", {"content": text})["tokens"]

    def decode(self, ids):
        return self._post("/detokenize", {"tokens": ids})["content"]

    def chat(self, text):
        return None
