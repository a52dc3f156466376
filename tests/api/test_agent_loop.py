"""GET /v1/tools (the run_python tool for OpenAI's and Anthropic's
function-calling APIs, described from the policy), and examples/agent_loop.py
run against a scripted OpenAI-compatible model on loopback, so the example
cannot rot."""
import http.server
import json
import os
import subprocess
import sys
import threading

from conftest import HOST_POLICY

SOURCE_DIR = (os.environ.get("SAFERUN_SOURCE_DIR")
              or os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(SOURCE_DIR, "examples", "agent_loop.py")

SMALL = {"filesystem": {"profile": "host"}, "limits": {"wall_time": "7s", "memory": "128M"}}
EGRESS = {"filesystem": {"profile": "host"},
          "network": {"mode": "egress", "allow": [{"cidr": "198.18.0.7", "ports": [8080]}]}}


def test_tools_in_both_shapes_described_from_the_policy(make_daemon):
    d = make_daemon(policies={"default": SMALL, "host": HOST_POLICY, "egress": EGRESS})
    both = d.get("/v1/tools").json()
    assert both["policy"] == "default" and both["run_url"] == "/v1/run"
    (oa,) = both["openai"]
    (an,) = both["anthropic"]
    assert oa["type"] == "function" and oa["function"]["name"] == an["name"] == "run_python"
    desc = oa["function"]["description"]
    assert an["description"] == desc
    schema = oa["function"]["parameters"]
    assert an["input_schema"] == schema
    assert schema["required"] == ["code"] and schema["additionalProperties"] is False
    assert set(schema["properties"]) == {"code", "timeout", "stdin"}
    # from the policy: its limits, no network, the checker's refusals, packages
    assert "7 s wall time" in desc and "128 MiB memory" in desc, desc
    assert "No network" in desc and "subprocess" in desc and "network APIs" in desc
    packages = d.get("/v1/packages").json()["packages"]
    assert packages and packages[0]["name"] in desc
    # one shape, as the array an API takes
    assert d.get("/v1/tools?format=openai").json() == [oa]
    assert d.get("/v1/tools?format=anthropic").json() == [an]
    # another policy: its network
    eg = d.get("/v1/tools?policy=egress&format=anthropic").json()[0]["description"]
    assert "outgoing connections only to 198.18.0.7/32:8080" in eg, eg
    assert "No network" not in eg and "network APIs" not in eg and "20 s wall time" in eg
    for query, field in (("format=xml", "format"), ("policy=nope", "policy")):
        r = d.get("/v1/tools?" + query)
        assert r.status_code == 400 and r.json()["field"] == field, r.text
    # the arguments are /v1/run's fields: a call's arguments run as they are
    r = d.post("/v1/run", {"code": "print(2)", "timeout": 5, "stdin": ""})
    assert r.status_code == 200 and r.json()["stdout"] == "2\n"


class ScriptedModel(http.server.BaseHTTPRequestHandler):
    """Answers /v1/chat/completions from a script: first a tool call, then,
    once the tool's output is in the conversation, the final answer."""
    seen = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ScriptedModel.seen.append((self.path, self.headers.get("Authorization"), body))
        last = body["messages"][-1]
        if last["role"] == "user":
            msg = {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "run_python", "arguments": json.dumps(
                    {"code": "import sys\nprint(6 * 7)\nprint('note', file=sys.stderr)"})}}]}
        else:
            msg = {"role": "assistant", "content": "The answer is " + last["content"].split()[0]}
        data = json.dumps({"id": "x", "object": "chat.completion", "model": body["model"],
                           "choices": [{"index": 0, "message": msg,
                                        "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_agent_loop_example_against_a_scripted_model(daemon):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ScriptedModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ScriptedModel.seen = []
    try:
        env = {**os.environ, "OPENAI_BASE_URL": f"http://127.0.0.1:{server.server_port}/v1",
               "OPENAI_API_KEY": "sk-test", "MODEL": "scripted",
               "SAFERUN_URL": "unix:" + daemon.socket}
        p = subprocess.run([sys.executable, EXAMPLE, "What is six times seven?"], env=env,
                           capture_output=True, text=True, timeout=120)
    finally:
        server.shutdown()
        server.server_close()
    assert p.returncode == 0, p.stderr
    assert p.stdout == "The answer is 42\n"
    assert p.stderr == "42\nnote\n"  # the run's output, shown as it came
    (path1, auth, first), (path2, _, second) = ScriptedModel.seen
    assert path1 == path2 == "/v1/chat/completions" and auth == "Bearer sk-test"
    assert first["model"] == "scripted"
    assert first["tools"] == daemon.get("/v1/tools?format=openai").json()
    assert first["messages"][-1] == {"role": "user", "content": "What is six times seven?"}
    tool_msg = second["messages"][-1]
    assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == "call_1"
    assert tool_msg["content"] == "42\nnote\n[status: ok, exit code 0]"
    assert [l for l in daemon.lines("run")][-1]["status"] == "ok"
