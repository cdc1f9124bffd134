"""kvload's parts, one concept a file: datasets (prompts), arrivals (when), backends (how a request
is sent and timed), scrape (the server's /metrics over time), runner (the open loop), stats (the
vLLM-named summary)."""
