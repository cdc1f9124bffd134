"""The served model's tokenizer, asked of the server under test, so prompts are sized in the
model's own tokens and sent as token ids: both servers then see exactly the same input."""
import json
import urllib.error
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


class OpenAiServerTokenizer:
    """An OpenAI-compatible server's tokenizer: GET /v1/models for the model and its context, and
    vLLM's /tokenize {"prompt"} and /detokenize (what kvserve's --http-port serves too). Chat
    prompts are rendered by /tokenize {"messages"} when the server can (else plain text)."""

    def __init__(self, base_url, api_key=None, max_context=8192):
        self.base_url = base_url.rstrip("/")
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        req = urllib.request.Request(self.base_url + "/v1/models", headers=self.headers)
        with urllib.request.urlopen(req, timeout=120) as r:
            model = json.load(r)["data"][0]
        self.model_id = model["id"]
        self.max_context = model.get("max_model_len") or max_context
        self.vocab_size = None
        try:
            reply = self._post("/tokenize", {"messages": [{"role": "user", "content": "hi"}]})
            self.has_chat_template = bool(reply.get("tokens"))
        except urllib.error.HTTPError:
            self.has_chat_template = False

    def _post(self, path, body):
        req = urllib.request.Request(self.base_url + path, json.dumps(body).encode(), self.headers)
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.load(r)

    def encode(self, text):
        # vLLM's (and kvserve's) "prompt", else llama-server's "content".
        out = self._post("/tokenize", {"prompt": text, "content": text, "add_special_tokens": False})
        return out["tokens"]

    def decode(self, ids):
        out = self._post("/detokenize", {"tokens": ids})
        return out["prompt"] if "prompt" in out else out["content"]

    def chat(self, text):
        if not self.has_chat_template:
            return None
        return self._post("/tokenize", {"messages": [{"role": "user", "content": text}]})["tokens"]
