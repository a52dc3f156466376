// The whole tour through the official SDK's Client: initialize, tools/list,
// run_python (ok and failing), check_python, an AgentRunPlus session (upload,
// execute, download, close), then the end of the MCP session.
//
//   node roundtrip.mjs --url http://127.0.0.1:PORT/mcp --token TOKEN
//   node roundtrip.mjs --stdio -- build/saferun mcp --policies-dir D --workspaces-dir W
//
// Prints one JSON line ({"ok": true, ...}) on stdout and exits 0, or says
// what did not match on stderr and exits 1.
import { check, connect, jsonOf, main, parseArgs, textOf } from './lib.mjs';

const TOOLS = ['run_python', 'check_python', 'create_session', 'execute_code', 'upload_file',
               'download_file', 'list_sessions', 'get_session_info', 'close_session',
               'get_packages', 'get_health', 'list_artifacts', 'list_src'];
const SESSION_TOOLS = ['execute_code', 'upload_file', 'download_file', 'get_session_info',
                       'close_session', 'list_artifacts', 'list_src'];

async function call(client, name, args = {}) {
    return client.callTool({ name, arguments: args });
}

await main(async (keep) => {
    const o = parseArgs();
    const conn = keep(await connect(o, 'saferun-roundtrip'));
    const { client } = conn;
    const summary = { transport: conn.kind };

    // initialize: what the server said about itself
    const info = client.getServerVersion();
    check(info && info.name === 'saferun', 'serverInfo.name is saferun', info);
    const caps = client.getServerCapabilities();
    check(caps && caps.tools, 'the server has the tools capability', caps);
    summary.server = info;
    summary.protocol_version = conn.transport.protocolVersion ?? null;
    if (conn.kind === 'http') {
        check(/^[0-9a-f]{32}$/.test(conn.transport.sessionId || ''),
              'initialize gave an Mcp-Session-Id of 32 hex characters', conn.transport.sessionId);
        check(conn.transport.protocolVersion === '2025-11-25',
              'the agreed protocol version is 2025-11-25', conn.transport.protocolVersion);
        summary.mcp_session_id = conn.transport.sessionId;
    }
    await client.ping();

    // tools/list
    const { tools } = await client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    summary.tools = tools.map((t) => t.name);
    for (const name of TOOLS) {
        const t = byName[name];
        check(t, `tools/list has ${name}`, summary.tools);
        check(typeof t.description === 'string' && t.description.length > 0, `${name} has a description`, t);
        check(t.inputSchema && t.inputSchema.type === 'object', `${name} has an object inputSchema`, t.inputSchema);
    }
    for (const name of ['run_python', 'check_python']) {
        const s = byName[name].inputSchema;
        check(s.properties && s.properties.code && s.properties.code.type === 'string',
              `${name}'s inputSchema has a string "code"`, s);
        check(Array.isArray(s.required) && s.required.includes('code'), `${name} requires "code"`, s.required);
    }
    for (const name of SESSION_TOOLS) {
        const s = byName[name].inputSchema;
        check(Array.isArray(s.required) && s.required.includes('session_id'),
              `${name} requires "session_id"`, s.required);
    }

    // run_python
    let r = await call(client, 'run_python', { code: "print('hi')" });
    let text = textOf(r);
    check(r.isError !== true, "run_python print('hi') is not an error", r);
    check(text.includes('hi'), "run_python print('hi'): the text has hi", text);
    check(/\[status: ok, exit code 0, \d+ ms\]/.test(text), 'the text states the status plainly', text);
    check(r.structuredContent && r.structuredContent.status === 'ok', 'structuredContent.status is ok', r.structuredContent);
    check(r.structuredContent.stdout === 'hi\n' && r.structuredContent.exit_code === 0,
          'structuredContent has stdout "hi\\n" and exit_code 0', r.structuredContent);

    r = await call(client, 'run_python', { code: '1/0' });
    text = textOf(r);
    check(r.isError === true, 'run_python 1/0 has isError true', r);
    check(text.includes('ZeroDivisionError'), 'run_python 1/0: the text names ZeroDivisionError', text);
    check(/\[status: error, exit code 1, \d+ ms\]/.test(text), 'the text states status error, exit code 1', text);
    check(r.structuredContent && r.structuredContent.status === 'error' && r.structuredContent.exit_code === 1,
          'structuredContent: status error, exit_code 1', r.structuredContent);
    check(r.structuredContent.stderr.includes('ZeroDivisionError: division by zero'),
          'structuredContent.stderr has the traceback', r.structuredContent.stderr);

    // check_python
    r = await call(client, 'check_python', { code: 'print(1)\n' });
    check(r.isError !== true && textOf(r).startsWith('clean:'), 'check_python on clean code says clean', r);
    check(r.structuredContent && r.structuredContent.verdict === 'clean' &&
          Array.isArray(r.structuredContent.findings) && r.structuredContent.findings.length === 0,
          'check_python clean: verdict clean, no findings', r.structuredContent);
    r = await call(client, 'check_python', { code: "import os\nos.system('ls')\n" });
    text = textOf(r);
    check(r.isError !== true, 'a rejection by check_python is a result, not an error', r);
    check(text.startsWith('rejected:') && text.includes('SR101'), 'check_python os.system: rejected, SR101', text);
    const f = r.structuredContent && r.structuredContent.findings;
    check(r.structuredContent.verdict === 'rejected' && Array.isArray(f) && f.length === 1 &&
          f[0].rule === 'SR101' && f[0].line === 2, 'check_python os.system: one SR101 finding on line 2',
          r.structuredContent);

    // an AgentRunPlus session: file in, code, file out
    const s = jsonOf(await call(client, 'create_session'), 'create_session');
    check(/^[0-9a-f]{16}$/.test(s.session_id), 'create_session gives a session_id', s);
    check(s.source_path === '/work/src' && s.artifact_path === '/work/artifacts' && s.workdir === s.session_id &&
          s.upload_url === `/sessions/${s.session_id}/copy-to` &&
          s.artifacts_url === `/sessions/${s.session_id}/artifacts`,
          'create_session: AgentRunPlus paths and urls', s);
    const sid = s.session_id;
    summary.session_id = sid;

    const data = Buffer.from([0, 1, 2, 255, 254, 10, 13, ...Buffer.from('saferun \u00e9\n')]);
    r = await call(client, 'upload_file', { session_id: sid, filename: 'data.bin',
                                            content_base64: data.toString('base64') });
    let j = jsonOf(r, 'upload_file');
    check(r.isError !== true && j.success === true && j.destination === '/work/src/data.bin' &&
          typeof j.message === 'string' && j.message.includes('data.bin'),
          'upload_file: success, destination /work/src/data.bin', j);

    const code = "data = open('src/data.bin', 'rb').read()\n" +
                 "open('artifacts/out.txt', 'wb').write(data[::-1] + b'!')\n" +
                 'print(len(data))\n';
    r = await call(client, 'execute_code', { session_id: sid, code });
    j = jsonOf(r, 'execute_code');
    check(r.isError !== true && j.success === true && j.output === `${data.length}\n`,
          `execute_code: success, output "${data.length}\\n"`, j);

    r = await call(client, 'execute_code', { session_id: sid, code: '1/0' });
    j = jsonOf(r, 'execute_code');
    check(r.isError === true && j.success === false && j.output.includes('ZeroDivisionError'),
          'execute_code 1/0: success false, isError, the traceback in output', { isError: r.isError, ...j });

    const src = jsonOf(await call(client, 'list_src', { session_id: sid }), 'list_src');
    check(src.count === 1 && src.files.length === 1 && src.files[0].name === 'data.bin' &&
          src.files[0].size_bytes === data.length, 'list_src: data.bin and its size', src);
    const arts = jsonOf(await call(client, 'list_artifacts', { session_id: sid }), 'list_artifacts');
    check(arts.count === 1 && arts.artifacts[0].name === 'out.txt' &&
          arts.artifacts[0].size_bytes === data.length + 1, 'list_artifacts: out.txt and its size', arts);

    const want = Buffer.concat([Buffer.from(data).reverse(), Buffer.from('!')]);
    for (const srcPath of ['artifacts/out.txt', '/work/artifacts/out.txt']) {
        r = await call(client, 'download_file', { session_id: sid, src_path: srcPath });
        j = jsonOf(r, 'download_file');
        check(r.isError !== true && j.success === true && j.filename === 'out.txt' && j.size_bytes === want.length,
              `download_file ${srcPath}: success, out.txt, ${want.length} bytes`, j);
        const got = Buffer.from(j.content_base64, 'base64');
        check(got.equals(want), `download_file ${srcPath}: the bytes the code wrote`,
              { got: got.toString('hex'), want: want.toString('hex') });
    }

    j = jsonOf(await call(client, 'get_session_info', { session_id: sid }), 'get_session_info');
    check(j.session_id === sid && j.source_path === '/work/src' && j.artifact_path === '/work/artifacts',
          'get_session_info of the open session', j);
    j = jsonOf(await call(client, 'list_sessions'), 'list_sessions');
    check(Array.isArray(j.active_sessions) && j.active_sessions.includes(sid) && j.count === j.active_sessions.length,
          'list_sessions has the session', j);
    summary.sessions_open = j.count;
    j = jsonOf(await call(client, 'get_health'), 'get_health');
    check(j.status === 'healthy' && j.active_sessions === summary.sessions_open, 'get_health: healthy, the session count', j);
    j = jsonOf(await call(client, 'get_packages'), 'get_packages');
    check(Array.isArray(j.packages) && j.count === j.packages.length, 'get_packages: packages and their count', j);

    r = await call(client, 'close_session', { session_id: sid });
    j = jsonOf(r, 'close_session');
    check(r.isError !== true && j.success === true && j.message === `Session ${sid} closed successfully`,
          'close_session: success', j);
    for (const [tool, args] of [['get_session_info', { session_id: sid }], ['close_session', { session_id: sid }],
                                ['execute_code', { session_id: sid, code: 'print(1)' }]]) {
        r = await call(client, tool, args);
        j = jsonOf(r, tool);
        check(r.isError === true && j.success === false && j.error === `Session ${sid} not found`,
              `${tool} after close_session: success false, "Session ${sid} not found", isError`,
              { isError: r.isError, ...j });
    }
    j = jsonOf(await call(client, 'list_sessions'), 'list_sessions');
    check(!j.active_sessions.includes(sid), 'list_sessions no longer has the session', j);

    // the end
    if (conn.kind === 'http') {
        const old = conn.transport.sessionId;
        await conn.transport.terminateSession(); // DELETE /mcp; throws unless 2xx or 405
        check(conn.transport.sessionId === undefined, 'terminateSession forgot the session id');
        // the ended session is 404 (spec: the server MUST answer 404 for it)
        const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
                          'Mcp-Session-Id': old };
        if (o.token) headers.Authorization = `Bearer ${o.token}`;
        const resp = await fetch(o.url, { method: 'POST', headers,
                                          body: JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'ping' }) });
        const body = await resp.text();
        check(resp.status === 404, 'a request with the ended Mcp-Session-Id is 404', { status: resp.status, body });
        const line = body.split('\n').find((l) => l.startsWith('data: '));
        const err = JSON.parse(line ? line.slice(6) : body);
        check(err.error && err.error.code === -32001, 'its JSON-RPC error code is -32001', err);
        summary.after_delete = resp.status;
        await client.close();
    } else {
        summary.server_exit = await conn.endStdin();
        summary.server_pid = conn.pid;
        summary.server_stderr = conn.stderr();
        await client.close();
        check(summary.server_exit.code === 0 && summary.server_exit.signal === null,
              'the stdio server exits 0 at EOF', summary.server_exit);
    }
    return summary;
});

