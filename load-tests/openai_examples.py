#!/usr/bin/env python3
"""The openai Python SDK's own README examples (completion, chat, streaming), unchanged but for
base_url, against kvserve's OpenAI-compatible HTTP API (`kvserve serve --http-port 8000`).

Usage: openai_examples.py [BASE_URL]   (default http://localhost:8000/v1; the API key comes from
$OPENAI_API_KEY as the SDK reads it: set it to a line of --api-key-file, or to anything when the
server has none)
"""
import os
import sys

from openai import OpenAI

base_url = sys.argv[1] if len(sys.argv) > 1 else "http://localhost:8000/v1"
os.environ.setdefault("OPENAI_API_KEY", "EMPTY")

client = OpenAI(base_url=base_url)

# Chat Completions (the README's first example). kvserve serves one model whatever the name.
completion = client.chat.completions.create(
    model="gpt-4o",
    messages=[
        {"role": "developer", "content": "Talk like a pirate."},
        {"role": "user", "content": "How do I check if a Python object is an instance of a class?"},
    ],
)
print(completion.choices[0].message.content)

# Streaming responses.
stream = client.chat.completions.create(
    model="gpt-4o",
    messages=[{"role": "user", "content": "Say this is a test"}],
    stream=True,
)
for chunk in stream:
    print(chunk.choices[0].delta.content or "", end="")
print()

# Legacy completions.
completion = client.completions.create(model="gpt-3.5-turbo-instruct", prompt="Say this is a test")
print(completion.choices[0].text)
