// Shared by the client scripts: connect the official MCP SDK's Client to
// saferun over Streamable HTTP or stdio, and fail loudly.
//
// Where to connect (argv first, then the environment):
//   --url URL [--token TOKEN]      MCP_URL, MCP_TOKEN      Streamable HTTP
//   --stdio -- COMMAND [ARGS...]   MCP_STDIO (a JSON array)  spawn COMMAND, talk on its stdin/stdout
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

export class Mismatch extends Error { name = 'Mismatch'; }

export function check(cond, what, got) {
    if (!cond) {
        const detail = got === undefined ? '' : `: got ${JSON.stringify(got)}`;
        throw new Mismatch(`${what}${detail}`);
    }
}

// Options: { url, token, stdio: [cmd, ...args] | null }
export function parseArgs(argv = process.argv.slice(2)) {
    const o = { url: process.env.MCP_URL || null, token: process.env.MCP_TOKEN ?? null,
                stdio: process.env.MCP_STDIO ? JSON.parse(process.env.MCP_STDIO) : null };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (a === '--url') o.url = argv[++i];
        else if (a === '--token') o.token = argv[++i];
        else if (a === '--stdio') {
            if (argv[i + 1] === '--') i++;
            o.stdio = argv.slice(i + 1);
            break;
        } else throw new Mismatch(`unknown argument ${JSON.stringify(a)}`);
    }
    if (o.stdio) o.url = null;
    if (!o.url && !(o.stdio && o.stdio.length))
        throw new Mismatch('say where the server is: --url URL [--token T] or --stdio -- COMMAND ARGS');
    return o;
}

// Connect (initialize + notifications/initialized, as every SDK client does).
// Returns { client, transport, kind, stderr(), serverExit() }.
export async function connect(o, name = 'saferun-test') {
    const client = new Client({ name, version: '1.0.0' }, { capabilities: {} });
    let transport;
    let stderrText = '';
    if (o.url) {
        const headers = o.token !== null && o.token !== undefined
            ? { Authorization: `Bearer ${o.token}` } : {};
        transport = new StreamableHTTPClientTransport(new URL(o.url), { requestInit: { headers } });
    } else {
        // The SDK's default environment (HOME, PATH, ...) as a desktop client
        // gives it, plus what a sanitizer build needs to report.
        const env = {};
        for (const k of Object.keys(process.env))
            if (/^(ASAN|LSAN|UBSAN)_OPTIONS$|^SAFERUND$/.test(k)) env[k] = process.env[k];
        transport = new StdioClientTransport({ command: o.stdio[0], args: o.stdio.slice(1),
                                               env, stderr: 'pipe' });
        transport.stderr.on('data', (chunk) => { stderrText += chunk.toString(); });
    }
    let exit = null;
    let exitWait = null;
    try {
        await client.connect(transport);
    } catch (e) {
        if (stderrText) e.message += `\n--- server stderr ---\n${stderrText}`;
        throw e;
    }
    if (!o.url) {
        // the child process, to see how it ends (the SDK keeps it private)
        const child = transport._process;
        check(child && typeof child.once === 'function', 'the stdio transport has a child process');
        exitWait = new Promise((resolve) => {
            child.once('exit', (code, signal) => { exit = { code, signal }; resolve(exit); });
        });
        return {
            client, transport, kind: 'stdio', stderr: () => stderrText,
            // End stdin as a client that is done does, and wait for the
            // server to exit by itself (the SDK's close() would SIGTERM it
            // after 2 s; that must not be needed).
            async endStdin(timeoutMs = 30000) {
                const t0 = Date.now();
                child.stdin.end();
                let timer;
                const res = await Promise.race([exitWait, new Promise((r) => {
                    timer = setTimeout(() => r(null), timeoutMs);
                })]);
                clearTimeout(timer);
                if (!res) throw new Mismatch(`the stdio server did not exit within ${timeoutMs} ms of EOF on its stdin`);
                return { ...res, ms: Date.now() - t0 };
            },
            pid: child.pid,
        };
    }
    return { client, transport, kind: 'http', stderr: () => '' };
}

export function deepEqual(a, b) {
    if (a === b) return true;
    if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
    if (Array.isArray(a) !== Array.isArray(b)) return false;
    const ka = Object.keys(a), kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
}

export function textOf(result) {
    check(Array.isArray(result.content) && result.content.length >= 1,
          'a tool result has content', result);
    check(result.content[0].type === 'text' && typeof result.content[0].text === 'string',
          'content[0] is text', result.content[0]);
    return result.content[0].text;
}

// AgentRunPlus-style tools: one JSON object in content[0].text, the same
// object as structuredContent.
export function jsonOf(result, tool) {
    const text = textOf(result);
    let obj;
    try {
        obj = JSON.parse(text);
    } catch (e) {
        throw new Mismatch(`${tool}: content[0].text is not JSON: ${JSON.stringify(text)}`);
    }
    check(deepEqual(obj, result.structuredContent),
          `${tool}: content[0].text and structuredContent hold the same object`,
          { text: obj, structuredContent: result.structuredContent });
    return obj;
}

// Run main(), print its summary as one JSON line, exit 0; on any error print
// it to stderr (with the stdio server's stderr) and exit 1.
export async function main(fn) {
    let conn = null;
    try {
        const summary = await fn((c) => { conn = c; return c; });
        process.stdout.write(JSON.stringify({ ok: true, ...summary }) + '\n');
        process.exit(0);
    } catch (e) {
        const what = e instanceof Mismatch ? 'MISMATCH' : 'ERROR';
        process.stderr.write(`${what}: ${e && e.stack || e}\n`);
        if (e && e.code !== undefined) process.stderr.write(`error code: ${e.code}\n`);
        if (conn && conn.stderr()) process.stderr.write(`--- server stderr ---\n${conn.stderr()}\n`);
        process.stdout.write(JSON.stringify({ ok: false, error: String(e && e.message || e),
                                              code: e && e.code !== undefined ? e.code : null }) + '\n');
        if (conn) await conn.client.close().catch(() => {});
        process.exit(1);
    }
}
