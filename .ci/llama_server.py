"""Serves a GGUF model with llama.cpp's own OpenAI-compatible HTTP server, from the
xllamacpp wheel (nothing compiled): `python llama_server.py MODEL.gguf PORT TEMPLATE.jinja`.

The server listens on 127.0.0.1:PORT (/health, /v1/chat/completions) in a background
thread of this process; the process waits until it is killed. One slot, so requests are
answered one at a time, as on a laptop.
"""

import sys
import time

import xllamacpp


def main() -> None:
    model, port, template = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    params = xllamacpp.CommonParams()
    params.model.path = model
    params.port = port
    params.n_ctx = 4096
    params.n_parallel = 1
    params.warmup = False
    # the model's own template has no tools; this one has Hermes-style <tool_call> blocks
    params.use_jinja = True
    with open(template, encoding="utf-8") as f:
        params.chat_template = f.read()
    server = xllamacpp.Server(params)
    print("listening", server.listening_address, flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
