"""AgentRunPlus's routes hand out absolute URLs, as AgentRunPlus does (its
AGENTRUN_BASE_URL): its users append to them and fetch the result with
plain requests, no base URL of their own."""
import requests

TOKEN = "public-url-test-token-0123456789"
AUTH = {"Authorization": "Bearer " + TOKEN}


def make_artifact(d, base):
    info = requests.post(base + "/sessions", headers=AUTH, timeout=60).json()
    r = requests.post(f"{base}/sessions/{info['session_id']}/execute", headers=AUTH, timeout=60,
                      json={"python_code": f"open('{info['artifact_path']}/out.csv', 'w')"
                                           ".write('a,b\\n1,2\\n')"})
    assert r.status_code == 200 and r.json()["success"], r.text
    return info


def test_artifacts_url_plus_a_name_downloads_the_file(make_daemon):
    d = make_daemon(tcp=True, token=TOKEN)
    base = d.tcp_url("")
    session = make_artifact(d, base)
    assert session["artifacts_url"] == f"{base}/sessions/{session['session_id']}/artifacts"
    assert session["upload_url"] == f"{base}/sessions/{session['session_id']}/copy-to"
    r = requests.get(session["artifacts_url"] + "/out.csv", headers=AUTH, timeout=60)
    assert r.status_code == 200 and r.content == b"a,b\n1,2\n"
    listing = requests.get(session["artifacts_url"], headers=AUTH, timeout=60).json()
    url = listing["artifacts"][0]["download_url"]
    assert url == session["artifacts_url"] + "/out.csv"
    assert requests.get(url, headers=AUTH, timeout=60).content == b"a,b\n1,2\n"


def test_public_url_wins_over_the_host_header(make_daemon):
    d = make_daemon("--public-url", "https://sandbox.example.com/saferun/", tcp=True, token=TOKEN)
    session = make_artifact(d, d.tcp_url(""))
    sid = session["session_id"]
    assert session["artifacts_url"] == f"https://sandbox.example.com/saferun/sessions/{sid}/artifacts"
    listing = requests.get(d.tcp_url(f"/sessions/{sid}/artifacts"), headers=AUTH, timeout=60).json()
    assert listing["artifacts"][0]["download_url"] == session["artifacts_url"] + "/out.csv"


def test_a_host_header_that_is_not_a_host_gives_relative_urls(make_daemon):
    d = make_daemon(tcp=True, token=TOKEN)
    r = requests.post(d.tcp_url("/sessions"), headers={**AUTH, "Host": "evil.example/x?"},
                      timeout=60)
    assert r.status_code == 200
    assert r.json()["upload_url"] == f"/sessions/{r.json()['session_id']}/copy-to"


def test_over_the_unix_socket_urls_stay_relative_unless_public_url_is_set(make_daemon):
    d = make_daemon()
    info = d.post("/sessions").json()
    assert info["artifacts_url"] == f"/sessions/{info['session_id']}/artifacts"
    d = make_daemon("--public-url", "http://10.0.0.5:8080")
    info = d.post("/sessions").json()
    assert info["artifacts_url"] == f"http://10.0.0.5:8080/sessions/{info['session_id']}/artifacts"


def test_a_bad_public_url_stops_the_start(make_daemon):
    d = make_daemon("--public-url", "ftp://x", start=False)
    d.start(wait=False)
    d.proc.wait(timeout=30)
    assert d.proc.returncode == 2
    start = d.lines("start")[-1]
    assert start["level"] == "error"
    assert start["msg"].startswith('saferund: public_url: "ftp://x" is not an http:// or https:// URL')
