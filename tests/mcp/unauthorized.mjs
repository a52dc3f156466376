// The SDK's Client must not get in without the right bearer token: connect
// (initialize) has to fail with the server's 401.
//
//   node unauthorized.mjs --url URL [--token WRONG]     (no --token: no header)
//
// Prints {"ok": true, "refused": 401, "message": ...} when the connection was
// refused with 401; exits 1 if it connected or failed any other way.
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { check, connect, main, parseArgs } from './lib.mjs';

await main(async () => {
    const o = parseArgs();
    check(o.url, 'unauthorized.mjs is for HTTP: give --url');
    let conn = null;
    try {
        conn = await connect(o, 'saferun-unauthorized');
    } catch (e) {
        check(e instanceof StreamableHTTPError, 'connect fails with a StreamableHTTPError', String(e));
        check(e.code === 401, 'connect fails with HTTP 401', { code: e.code, message: e.message });
        return { refused: e.code, message: e.message };
    }
    const sid = conn.transport.sessionId;
    await conn.client.close();
    check(false, 'connect without the right token must fail, but it connected', { mcp_session_id: sid });
});
