// run_python through the official SDK's Client with onprogress: prints when
// (the wall clock, in seconds, as Python's time.time()) each progress
// notification arrived, its progress and message, and the result, for
// tests that check output streams while the code runs.
//
//   node progress.mjs --url URL [--token T] 'CODE'
//   node progress.mjs --stdio -- COMMAND ARGS... -- 'CODE'
import { check, connect, main, Mismatch, parseArgs } from './lib.mjs';

await main(async (keep) => {
    const argv = process.argv.slice(2);
    let code;
    let opts;
    if (argv[0] === '--stdio') {
        const start = argv[1] === '--' ? 2 : 1;
        const end = argv.indexOf('--', start);
        if (end < 0) throw new Mismatch('--stdio -- COMMAND ARGS -- CODE: the second -- is missing');
        opts = ['--stdio', ...argv.slice(start, end)];
        code = argv[end + 1];
    } else {
        opts = argv.slice(0, -1);
        code = argv[argv.length - 1];
    }
    const conn = keep(await connect(parseArgs(opts), 'saferun-progress'));
    const { client } = conn;
    const progress = [];
    const result = await client.callTool({ name: 'run_python', arguments: { code } }, undefined, {
        onprogress: (p) => progress.push({ t: Date.now() / 1000, progress: p.progress,
                                           message: p.message ?? null }),
    });
    const out = { transport: conn.kind, progress, result, answered_t: Date.now() / 1000,
                  protocol_version: conn.transport.protocolVersion ?? null };
    if (conn.kind === 'http') {
        await conn.transport.terminateSession();
        await client.close();
        return out;
    }
    out.server_pid = conn.pid;
    out.server_exit = await conn.endStdin();
    out.server_stderr = conn.stderr();
    await client.close();
    check(out.server_exit.code === 0, 'the stdio server exits 0 at EOF', out.server_exit);
    return out;
});
