// Call tools one after another through the official SDK's Client and print
// their results, for tests that check the server's side of things.
//
//   node call.mjs --url URL [--token T] TOOL 'JSON-ARGS' [TOOL 'JSON-ARGS' ...]
//   node call.mjs [--inflight CODE] --stdio -- COMMAND ARGS... TOOL 'JSON-ARGS' ...
//
// "{{session_id}}" in the arguments is the session_id of the latest result
// that had one. Over HTTP the MCP session is ended (DELETE) at the end; over
// stdio stdin is closed and the server must exit by itself. With --inflight,
// run_python CODE is sent last and not waited for before stdin closes.
// Prints {"ok": true, "results": [...], ...} as one JSON line.
import { check, connect, main, Mismatch, parseArgs } from './lib.mjs';

function parse(argv) {
    // TOOL/ARGS pairs come after the connection options; for --stdio they
    // follow the command, after a second "--".
    const opts = [];
    let inflight = null;
    let i = 0;
    for (; i < argv.length; i++) {
        if (argv[i] === '--inflight') inflight = argv[++i];
        else if (argv[i] === '--url' || argv[i] === '--token') opts.push(argv[i], argv[++i]);
        else if (argv[i] === '--stdio') {
            const end = argv.indexOf('--', argv[i + 1] === '--' ? i + 2 : i + 1);
            const start = argv[i + 1] === '--' ? i + 2 : i + 1;
            if (end < 0) throw new Mismatch('--stdio -- COMMAND ARGS -- TOOL JSON ...: the second -- is missing');
            opts.push('--stdio', ...argv.slice(start, end));
            i = end;
        } else break;
    }
    const pairs = argv.slice(i);
    if (pairs.length % 2) throw new Mismatch('give TOOL and JSON-ARGS in pairs');
    const calls = [];
    for (let k = 0; k < pairs.length; k += 2) calls.push([pairs[k], pairs[k + 1]]);
    return { opts, calls, inflight };
}

await main(async (keep) => {
    const { opts, calls, inflight } = parse(process.argv.slice(2));
    const o = parseArgs(opts);
    const conn = keep(await connect(o, 'saferun-call'));
    const { client } = conn;
    const out = { transport: conn.kind, results: [] };
    let sid = null;
    for (const [name, raw] of calls) {
        const args = JSON.parse(sid ? raw.replaceAll('{{session_id}}', sid) : raw);
        const r = await client.callTool({ name, arguments: args });
        out.results.push({ tool: name, ...r });
        if (r.structuredContent && typeof r.structuredContent.session_id === 'string')
            sid = r.structuredContent.session_id;
    }
    out.session_id = sid;
    if (conn.kind === 'http') {
        out.mcp_session_id = conn.transport.sessionId;
        await conn.transport.terminateSession();
        await client.close();
        return out;
    }
    let pending = null;
    if (inflight !== null) {
        pending = client.callTool({ name: 'run_python', arguments: { code: inflight } })
            .then((r) => ({ answered: true, result: r }), (e) => ({ answered: false, error: String(e) }));
        await new Promise((r) => setTimeout(r, 300)); // let it start
    }
    out.server_pid = conn.pid;
    out.server_exit = await conn.endStdin();
    out.server_stderr = conn.stderr();
    if (pending) {
        // the answer was written before the server exited, or it never comes
        out.inflight = await Promise.race([pending, new Promise((r) => setTimeout(
            () => r({ answered: false, error: 'no answer' }), 1000))]);
    }
    await client.close();
    check(out.server_exit.code === 0 && out.server_exit.signal === null, 'the stdio server exits 0 at EOF',
          out.server_exit);
    return out;
});
