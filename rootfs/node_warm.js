// The preload of a pooled JavaScript sandbox (the warm path for
// JavaScript, runtime/lib/run/warm_node.c; docs/languages.md): the pool
// starts `node -r ./.saferun-node.js main.js` in a sandbox built and
// locked down the cold way, with this file written into its working dir.
// Node starts, runs this preload, which waits on fd 3 for one run; it
// writes that run's files and main.js, takes the run's environment, and
// removes every trace of itself. Then Node goes on exactly as `node
// main.js` does: its own loader runs main.js as the main module, with its
// own error reports and exit code. The sandbox serves that one run.
//
// Protocol on fd 3 (SOCK_SEQPACKET; Node cannot receive fds, so bytes
// come inline): this file sends "R" once Node is up; the run is a message
// "W" <u32 code length> <u32 environment length> <u32 files length>, then
// the payload in messages of at most 32 KiB: the code, the environment
// ("KEY=VALUE" each ending in NUL), the files (<u32 name length> <u32
// size> name data each). stdin is a pipe the supervisor fills and closes.
'use strict';
(() => {
	const fs = require('fs');
	const path = require('path');
	const CTL = 3;
	const CHUNK = 32768;

	const read = (buf, at, len) => {
		for (;;) {
			try {
				return fs.readSync(CTL, buf, at, len, null);
			} catch (e) {
				if (e.code !== 'EINTR' && e.code !== 'EAGAIN') return 0;
			}
		}
	};
	// The supervisor went (the pool stopped) before a run came.
	const gone = () => process.exit(0);

	fs.writeSync(CTL, 'R');
	const head = Buffer.alloc(64);
	if (read(head, 0, head.length) !== 13 || head[0] !== 0x57 /* W */) gone();
	const codeLen = head.readUInt32LE(1);
	const envLen = head.readUInt32LE(5);
	const filesLen = head.readUInt32LE(9);
	const body = Buffer.alloc(codeLen + envLen + filesLen);
	// Each message is read whole: a SEQPACKET read shorter than its
	// message would drop the rest (every message but the last is CHUNK).
	for (let got = 0; got < body.length; ) {
		const n = read(body, got, Math.min(CHUNK, body.length - got));
		if (n <= 0) gone();
		got += n;
	}
	fs.closeSync(CTL);

	// Nothing of this preload is left for the code to see.
	fs.unlinkSync(__filename);
	delete require.cache[__filename];
	process.execArgv.splice(0); // child_process.fork() passes them on

	for (const key of Object.keys(process.env)) delete process.env[key];
	for (const kv of body.toString('utf8', codeLen, codeLen + envLen).split('\0')) {
		const eq = kv.indexOf('=');
		if (eq > 0) process.env[kv.slice(0, eq)] = kv.slice(eq + 1);
	}

	// As the cold path's mount plan writes them: dirs 0755, files 0644.
	for (let at = codeLen + envLen; at < body.length; ) {
		const nameLen = body.readUInt32LE(at);
		const size = body.readUInt32LE(at + 4);
		const name = body.toString('utf8', at + 8, at + 8 + nameLen);
		const data = body.subarray(at + 8 + nameLen, at + 8 + nameLen + size);
		at += 8 + nameLen + size;
		fs.mkdirSync(path.dirname(name), { recursive: true, mode: 0o755 });
		fs.writeFileSync(name, data, { mode: 0o644, flag: 'wx' });
	}
	fs.writeFileSync('main.js', body.subarray(0, codeLen), { mode: 0o644, flag: 'wx' });
})();
