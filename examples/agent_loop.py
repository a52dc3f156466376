#!/usr/bin/env python3
"""An agent loop over saferun, standard library only: ask a model (any
OpenAI-compatible chat completions endpoint) with saferun's run_python tool,
run the code it asks for in saferund, feed the output back, and stop when
the model answers without a tool call. The loop of AgentRun's README, with
saferund as the sandbox.

    python3 examples/agent_loop.py "What is the 20th Fibonacci number?"

Settings (environment):
    OPENAI_BASE_URL  the chat completions API (default https://api.openai.com/v1;
                     a local server such as llama.cpp, vLLM or Ollama's /v1 works)
    OPENAI_API_KEY   its key (sent as a bearer token when set)
    MODEL            the model (default gpt-4o-mini)
    SAFERUN_URL      saferund: unix:/run/saferun/saferund.sock (the default) or
                     http://127.0.0.1:8000
    SAFERUN_TOKEN    saferund's bearer token (TCP)
    MAX_STEPS        model calls at most (default 8)

The tool's definition comes from saferund (GET /v1/tools?format=openai), so
the model reads what this daemon's sandbox has and forbids; a tool call's
arguments are POST /v1/run's fields as they are. The code's output is shown
on stderr as it runs ("stream": true).
"""
import http.client
import json
import os
import socket
import sys
import urllib.parse

SYSTEM = ("You solve tasks by writing Python and running it with the run_python tool. "
          "Look at the output before you answer; when you have the answer, reply "
          "without calling a tool.")


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=300):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


def connect(url):
    """(connection, path prefix) for an http(s):// or unix: URL."""
    if url.startswith("unix:"):
        return UnixConnection(url[5:]), ""
    u = urllib.parse.urlsplit(url)
    cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    return cls(u.hostname, u.port, timeout=300), u.path.rstrip("/")


def request(url, method, path, body=None, token=None):
    """Send one request; the response (the caller reads and closes it)."""
    conn, prefix = connect(url)
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    if body is not None and body.get("stream"):
        headers["Accept"] = "application/x-ndjson"
    conn.request(method, prefix + path, json.dumps(body) if body is not None else None,
                 headers)
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"{method} {url}{path}: {resp.status} {resp.read()[:500]!r}")
    return resp


def call_json(url, method, path, body=None, token=None):
    resp = request(url, method, path, body, token)
    try:
        return json.loads(resp.read())
    finally:
        resp.close()


def run_code(saferun, token, args):
    """Run a tool call's arguments in saferund, showing the output as it
    comes; the result object."""
    resp = request(saferun, "POST", "/v1/run", {**args, "stream": True}, token)
    result = None
    try:
        for line in resp:
            item = json.loads(line)
            if item["type"] in ("stdout", "stderr"):
                sys.stderr.write(item["data"])
                sys.stderr.flush()
            elif item["type"] == "result":
                result = item
            elif item["type"] == "error":
                raise RuntimeError(item["error"])
    finally:
        resp.close()
    return result


def tool_output(res):
    """What the model reads back: the output, then how the run ended."""
    text = res["output"]
    if len(text) > 20000:
        text = text[:10000] + "\n...[cut]...\n" + text[-10000:]
    end = f"[status: {res['status']}, exit code {res['exit_code']}]"
    if res["status"] not in ("ok", "error") and res.get("message"):
        end += " " + res["message"]
    return text + ("" if not text or text.endswith("\n") else "\n") + end


def agent(question, model_url, model_key, model, saferun, token, max_steps=8):
    tools = call_json(saferun, "GET", "/v1/tools?format=openai", token=token)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    for _ in range(max_steps):
        reply = call_json(model_url, "POST", "/chat/completions",
                          {"model": model, "messages": messages, "tools": tools}, model_key)
        msg = reply["choices"][0]["message"]
        messages.append(msg)
        calls = msg.get("tool_calls") or []
        if not calls:
            return msg.get("content") or ""
        for call in calls:
            fn = call["function"]
            try:
                args = json.loads(fn["arguments"] or "{}")
                if fn["name"] != "run_python" or not isinstance(args, dict):
                    raise ValueError(f"unknown tool {fn['name']!r}")
                out = tool_output(run_code(saferun, token, args))
            except (ValueError, RuntimeError) as e:
                out = f"[tool error: {e}]"
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": out})
    raise RuntimeError(f"no final answer after {max_steps} model calls")


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} QUESTION")
    env = os.environ
    answer = agent(sys.argv[1],
                   env.get("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/"),
                   env.get("OPENAI_API_KEY"), env.get("MODEL", "gpt-4o-mini"),
                   env.get("SAFERUN_URL", "unix:/run/saferun/saferund.sock"),
                   env.get("SAFERUN_TOKEN"), int(env.get("MAX_STEPS", "8")))
    print(answer)


if __name__ == "__main__":
    main()
