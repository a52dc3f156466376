"""The fleet's deployment files (deploy/k8s, deploy/nomad, deploy/haproxy),
checked offline: no cluster runs here, so they are parsed and what must agree
with the daemon and between the objects is checked: the flags saferund
takes, the node id the pods make, ports, probe paths and the socket they
ask, the grace period against the drain bound, the names one object gives
another (Secret, ConfigMaps, labels, mount paths), the policies (checked by
saferun itself), and the router config (checked by HAProxy itself)."""
import json
import os
import re
import shlex
import subprocess
import tempfile

import yaml

from conftest import SAFERUND

SOURCE_DIR = (os.environ.get("SAFERUN_SOURCE_DIR")
              or os.path.join(os.path.dirname(__file__), "..", ".."))
SAFERUN = os.environ.get("SAFERUN") or os.path.join(os.path.dirname(SAFERUND), "saferun")
K8S = os.path.join(SOURCE_DIR, "deploy", "k8s")
NOMAD = os.path.join(SOURCE_DIR, "deploy", "nomad")
RENDER = os.path.join(SOURCE_DIR, "deploy", "haproxy", "render")
DEFAULT_SOCKET = "/run/saferun/saferund.sock"
DRAIN_SLACK_S = 15  # past shutdown_grace: 10 s for killed runs, 5 s for answers


def k8s_objects():
    objs = {}
    for name in sorted(os.listdir(K8S)):
        if name.endswith(".yaml"):
            with open(os.path.join(K8S, name)) as f:
                for doc in yaml.safe_load_all(f):
                    assert doc["apiVersion"] and doc["metadata"]["name"], name
                    objs[(doc["kind"], doc["metadata"]["name"])] = doc
    return objs


def saferund_flags():
    p = subprocess.run([SAFERUND, "--help"], capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    return set(re.findall(r"^\s+(--[a-z-]+)", p.stdout, re.M))


def saferund_argv(shell_line):
    """The argv of the `exec saferund ...` in a shell line, $(...) left as is."""
    line = shell_line[shell_line.index("saferund"):]
    return shlex.split(line)


def flag(argv, name):
    return argv[argv.index(name) + 1]


def check_saferund_argv(argv):
    known = saferund_flags()
    used = [a for a in argv if a.startswith("--")]
    assert set(used) <= known, set(used) - known
    grace = flag(argv, "--shutdown-grace")
    assert re.fullmatch(r"\d+s", grace), grace
    return int(grace[:-1])


def node_id_accepted(node_id):
    """saferund validates --node-id before anything else can fail: a missing
    policies dir is then the error, never the id."""
    p = subprocess.run([SAFERUND, "--node-id", node_id, "--socket", "",
                        "--policies-dir", "/nonexistent-saferun-policies"],
                       capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert p.returncode == 2 and "nonexistent-saferun-policies" in p.stderr, p.stderr
    return "--node-id" not in p.stderr


def pod_node_id(shell_line, ip):
    """Run the line's node id expression with POD_IP=ip."""
    expr = re.search(r'--node-id ("[^"]*\$\(echo "\$\w+" \| tr \. -\)")', shell_line).group(1)
    var = re.search(r'echo "\$(\w+)"', expr).group(1)
    return subprocess.run(["/bin/sh", "-c", f"printf %s {expr}"], env={var: ip, "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, check=True).stdout


def check_policies(files):
    with tempfile.TemporaryDirectory() as d:
        for name, text in files.items():
            path = os.path.join(d, name)
            with open(path, "w") as f:
                f.write(text)
            p = subprocess.run([SAFERUN, "policy", "check", path], capture_output=True,
                               text=True, timeout=30, stdin=subprocess.DEVNULL)
            assert p.returncode == 0, (name, p.stdout, p.stderr)


def test_k8s_daemonset_agrees_with_the_daemon():
    objs = k8s_objects()
    ds = objs[("DaemonSet", "saferund")]
    pod = ds["spec"]["template"]["spec"]
    assert ds["spec"]["selector"]["matchLabels"].items() <= \
        ds["spec"]["template"]["metadata"]["labels"].items()
    c = next(c for c in pod["containers"] if c["name"] == "saferund")
    line = c["args"][0]
    argv = saferund_argv(line)
    grace = check_saferund_argv(argv)
    assert pod["terminationGracePeriodSeconds"] >= grace + DRAIN_SLACK_S
    # the node id the pod makes from its IP is one saferund takes
    assert pod_node_id(line, "10.244.123.255") == "p10-244-123-255"
    assert node_id_accepted("p10-244-123-255")
    port = int(flag(argv, "--listen").rsplit(":", 1)[1])
    assert {"name": "http", "containerPort": port, "protocol": "TCP"} in c["ports"]
    # probes: the unix socket at its default path, on a mounted dir
    assert "--socket" not in argv
    live = " ".join(c["livenessProbe"]["exec"]["command"])
    ready = c["readinessProbe"]["exec"]["command"]
    assert "/v1/health" in live and DEFAULT_SOCKET in live and "503" in live
    assert ready[-1] == "http://localhost/v1/ready" and DEFAULT_SOCKET in ready and "-f" in ready[1]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert mounts["run"] == os.path.dirname(DEFAULT_SOCKET)
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert set(mounts) <= set(volumes)
    # the token and the policies come from the objects that hold them
    secret = objs[("Secret", volumes["token"]["secret"]["secretName"])]
    key, = secret["stringData"]
    assert flag(argv, "--token-file") == f"{mounts['token']}/{key}"
    policies = objs[("ConfigMap", volumes["policies"]["configMap"]["name"])]
    assert flag(argv, "--policies-dir") == mounts["policies"]
    assert flag(argv, "--rootfs-dir") == mounts["rootfs"]
    check_policies(policies["data"])
    # privileged, and nothing of the host's namespaces
    assert c["securityContext"] == {"privileged": True}
    assert not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))
    for obj in objs.values():
        assert obj["kind"] == "Namespace" or obj["metadata"]["namespace"] == "saferun"


def test_k8s_service_and_router_point_at_the_right_things():
    objs = k8s_objects()
    ds = objs[("DaemonSet", "saferund")]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    svc = objs[("Service", "saferund")]
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"].items() <= labels.items()
    c = ds["spec"]["template"]["spec"]["containers"][0]
    assert svc["spec"]["ports"][0]["targetPort"] in {p["name"] for p in c["ports"]}
    router = objs[("Deployment", "saferun-router")]
    rpod = router["spec"]["template"]["spec"]
    rc = rpod["containers"][0]
    env = {e["name"]: e for e in rc["env"]}
    ref = env["SAFERUN_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert ("Secret", ref["name"]) in objs and ref["key"] in objs[("Secret", ref["name"])]["stringData"]
    rsvc = objs[("Service", "saferun-router")]
    assert rsvc["spec"]["selector"].items() <= router["spec"]["template"]["metadata"]["labels"].items()
    # router-config makes the ConfigMap the router mounts, for the path and
    # port it mounts and serves, from the pods the DaemonSet labels, with the
    # node ids the DaemonSet's pods take
    with open(os.path.join(K8S, "router-config")) as f:
        script = f.read()
    volumes = {v["name"]: v for v in rpod["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in rc["volumeMounts"]}
    assert f"create configmap {volumes['config']['configMap']['name']} " in script
    assert f"--config-dir {mounts['config']}" in script
    assert f"--run-dir {mounts['run']}" in script
    assert f"{mounts['config']}/haproxy.cfg" in rc["args"]
    bind_port = int(re.search(r"--bind :(\d+)", script).group(1))
    assert {"name": "http", "containerPort": bind_port} in rc["ports"]
    label, value = next(iter(labels.items()))
    assert f"-l {label}={value}" in script
    node_port = c["ports"][0]["containerPort"]
    awk = re.search(r"awk '([^']*)'", script).group(1)
    nodes = subprocess.run(["awk", awk], input="10.244.1.7\n10.244.2.9\n", capture_output=True,
                           text=True, check=True).stdout
    assert nodes == f"p10-244-1-7 10.244.1.7:{node_port}\np10-244-2-9 10.244.2.9:{node_port}\n"
    check_router_config(nodes, ["--bind", f":{bind_port}", "--run-dir", mounts["run"],
                                "--config-dir", mounts["config"]])


def check_router_config(nodes, args):
    """render the node list as the deployment does; haproxy -c accepts it.
    Returns the rendered nodes.map and haproxy.cfg."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "nodes"), "w") as f:
            f.write(nodes)
        subprocess.run([RENDER, os.path.join(d, "nodes"), d, *args], check=True,
                       capture_output=True, timeout=30)
        # haproxy -c opens the map: point it at the rendered one
        with open(os.path.join(d, "haproxy.cfg")) as f:
            cfg = f.read()
        m = re.search(r"map\(([^)]*)/nodes\.map\)", cfg)
        cfg = cfg.replace(m.group(1) + "/nodes.map", os.path.join(d, "nodes.map"))
        with open(os.path.join(d, "check.cfg"), "w") as f:
            f.write(cfg)
        p = subprocess.run(["haproxy", "-c", "-f", os.path.join(d, "check.cfg")],
                           capture_output=True, text=True, timeout=30,
                           env={"SAFERUN_TOKEN": "t" * 32, "PATH": os.environ["PATH"]})
        assert p.returncode == 0, p.stdout + p.stderr
        with open(os.path.join(d, "nodes.map")) as f:
            return f.read(), cfg


def nomad_job(name):
    with open(os.path.join(NOMAD, name)) as f:
        return json.load(f)["Job"]


def test_nomad_system_job_agrees_with_the_daemon():
    job = nomad_job("saferund.nomad.json")
    assert job["Type"] == "system"
    group, = job["TaskGroups"]
    task, = group["Tasks"]
    line = task["Config"]["args"][-1]
    argv = saferund_argv(line)
    grace = check_saferund_argv(argv)
    assert task["KillSignal"] == "SIGTERM"
    assert task["KillTimeout"] >= (grace + DRAIN_SLACK_S) * 10**9
    assert pod_node_id(line, "192.168.40.3") == "p192-168-40-3"
    ports = {p["Label"]: p["Value"] for p in group["Networks"][0]["ReservedPorts"]}
    assert flag(argv, "--listen") == '$NOMAD_ADDR_http' and "http" in ports
    service, = group["Services"]
    assert service["PortLabel"] == "http" and service["Name"] == "saferund"
    tmpl = {t["DestPath"]: t for t in task["Templates"]}
    assert flag(argv, "--token-file") == "$NOMAD_SECRETS_DIR/token" and "secrets/token" in tmpl
    assert flag(argv, "--policies-dir") == "$NOMAD_TASK_DIR/policies"
    policies = {os.path.basename(p): t["EmbeddedTmpl"] for p, t in tmpl.items()
                if p.startswith("local/policies/")}
    assert policies and all(t["ChangeSignal"] == "SIGHUP" for p, t in tmpl.items()
                            if p.startswith("local/policies/"))
    check_policies(policies)


def test_nomad_router_lists_the_nodes_the_system_job_registers():
    node_job = nomad_job("saferund.nomad.json")
    service = node_job["TaskGroups"][0]["Services"][0]["Name"]
    token_tmpl = node_job["TaskGroups"][0]["Tasks"][0]["Templates"][0]["EmbeddedTmpl"]
    job = nomad_job("router.nomad.json")
    task = job["TaskGroups"][0]["Tasks"][0]
    tmpl = {t["DestPath"]: t for t in task["Templates"]}
    nodes = tmpl["local/nodes"]["EmbeddedTmpl"]
    assert f'nomadService "{service}"' in nodes
    # the same node id as the system job's: p + the address, '-' for '.'
    assert nodes.startswith('{{ range nomadService "saferund" }}p{{ .Address | replaceAll "." "-" }} ')
    env = tmpl["secrets/token.env"]
    assert env["Env"] is True and env["EmbeddedTmpl"].startswith("SAFERUN_TOKEN=")
    assert token_tmpl.strip() in env["EmbeddedTmpl"]
    line = task["Config"]["args"][-1]
    assert '"$NOMAD_TASK_DIR/nodes"' in line and '"$NOMAD_TASK_DIR/haproxy.cfg"' in line
    check_router_config("p10-0-0-1 10.0.0.1:8000\n", ["--bind", "127.0.0.1:8080"])


def test_render_maps_each_node_to_its_backend_and_refuses_a_bad_list():
    nodes_map, cfg = check_router_config("n1 10.0.0.1:8000\nn-2 [::1]:8000\n", [])
    assert nodes_map == "n1 node_n1\nn-2 node_n-2\n"
    # each node's session backend has no check of its own: its server
    # tracks the node's pool server (DOWN, NOLB together), and use-server
    # sends to it while it is NOLB (draining or full)
    for node, addr in (("n1", "10.0.0.1:8000"), ("n-2", "[::1]:8000")):
        backend = cfg.split(f"\nbackend node_{node}\n", 1)[1].split("\n\n", 1)[0]
        servers = [line.split() for line in backend.splitlines() if line.split()[:1] == ["server"]]
        assert servers == [["server", node, addr, "track", f"pool/{node}"]], backend
        assert f"    use-server {node} if TRUE\n" in backend, backend
    assert "    http-check expect status 200 error-status L7OKC\n" in cfg
    for bad, why in (("N1 10.0.0.1:8000\n", "is not"), ("n1 10.0.0.1\n", "is not"),
                     ("n1 1.2.3.4:1\nn1 1.2.3.5:1\n", "listed twice"), ("# none\n", "empty")):
        with tempfile.TemporaryDirectory() as d:
            p = subprocess.run([RENDER, "-", d], input=bad, capture_output=True, text=True,
                               timeout=30)
            assert p.returncode == 2 and why in p.stderr, (bad, p.stderr)
