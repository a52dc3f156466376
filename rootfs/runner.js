// The in-sandbox runner of a JavaScript kernel (sr_kernel, stateful
// sessions; docs/languages.md): `node -e <this file> saferun-kernel`.
// One-shot JavaScript runs do not use it: they are `node main.js`.
//
// Every run's code is a script compiled as "main.js" and run in this
// process's one global context (vm.runInThisContext), so what a run
// declares stays for the next: var, function and class declarations and
// globals, and top-level let/const too (they live in the context's global
// lexical scope, as in a browser console; declaring the same let twice is
// a SyntaxError there as here). A run whose last expression is a promise
// is waited for (`(async () => { ... })()`); callbacks it leaves pending run
// when the next run comes (the cgroup is frozen between runs).
//
// Protocol on fd 3 (SOCK_SEQPACKET, read with plain reads by a worker
// thread: Node cannot receive the fd a Python kernel gets,
// runtime/lib/run/kernel.c): the
// runner sends "R" when ready; each run is a message "X" <u32 code length>
// <u32 0> <u8 flags>, then the code in messages of at most 32 KiB; the
// reply is "D" <i32 status> (0 ok, 1 an uncaught error, N process.exit(N))
// after the output is written (stdout and stderr are pipes, written
// synchronously by Node on Linux). The socket closing ends the kernel.
//
// With SAFERUN_NOTEBOOK=PATH in its environment (E2B's code interpreter,
// runtime/daemon/e2b_exec.c), each run ends by writing PATH as JSON, as
// the Python runner does: {"results": [the last expression's value as
// util.inspect shows it, unless undefined], "error": {name, value,
// traceback} or null}; an uncaught error is then that error, not stderr.
(() => {
	'use strict';
	const fs = require('fs');
	const path = require('path');
	const util = require('util');
	const vm = require('vm');
	const { createRequire } = require('module');
	const CTL = 3;
	const main = path.join(process.cwd(), 'main.js');
	const realExit = process.exit.bind(process);
	const nbPath = process.env.SAFERUN_NOTEBOOK;
	delete process.env.SAFERUN_NOTEBOOK;
	let nbError = null;

	// What `node main.js` gives a script, for code that uses it.
	globalThis.require = createRequire(main);
	globalThis.module = { exports: {}, filename: main, id: '.' };
	globalThis.exports = globalThis.module.exports;
	globalThis.__filename = main;
	globalThis.__dirname = process.cwd();

	// process.exit(n) ends the run with status n, not the kernel.
	class Exit {
		constructor(code) {
			this.code = code;
		}
	}
	process.exit = (code) => {
		throw new Exit(code === undefined ? process.exitCode : code);
	};

	let failed = false; // an error thrown by a callback of this run
	const report = (e) => {
		if (nbPath) {
			const err = e instanceof Error;
			nbError = nbError || {
				name: err ? e.name : 'Error',
				value: err ? e.message : util.inspect(e),
				traceback: err && e.stack ? e.stack : `Uncaught ${util.inspect(e)}`
			};
			return;
		}
		const text = e instanceof Error && e.stack ? e.stack : `Uncaught ${util.inspect(e)}`;
		process.stderr.write(`${text}\n`);
	};
	process.on('uncaughtException', (e) => {
		if (e instanceof Exit) return;
		failed = true;
		report(e);
	});
	process.on('unhandledRejection', (e) => {
		failed = true;
		report(e);
	});

	// fd 3 is read by a worker thread, never by the code's thread: the
	// socket closing (the supervisor gone) ends the kernel at once, even
	// in the middle of a run that never yields (Python's runner has a
	// watcher thread for the same). Each run's code comes to this thread
	// through a message port, received synchronously between runs.
	const { Worker, MessageChannel, receiveMessageOnPort } = require('worker_threads');
	const { port1, port2 } = new MessageChannel();
	const arrived = new Int32Array(new SharedArrayBuffer(4));
	const reader = `
		const fs = require('fs');
		const { port, arrived } = require('worker_threads').workerData;
		const gone = () => process.kill(process.pid, 'SIGKILL');
		const read = (buf, at, len) => {
			for (;;) {
				try {
					return fs.readSync(${CTL}, buf, at, len, null);
				} catch (e) {
					if (e.code !== 'EINTR' && e.code !== 'EAGAIN') return 0;
				}
			}
		};
		for (;;) {
			const head = Buffer.alloc(64);
			const n = read(head, 0, head.length);
			if (n < 10 || head[0] !== 0x58 /* X */) gone();
			const len = head.readUInt32LE(1);
			const code = Buffer.alloc(len);
			for (let got = 0; got < len; ) {
				const m = read(code, got, len - got);
				if (m <= 0) gone();
				got += m;
			}
			port.postMessage(code.toString('utf8'));
			Atomics.add(arrived, 0, 1);
			Atomics.notify(arrived, 0);
		}`;
	new Worker(reader, { eval: true, workerData: { port: port2, arrived }, transferList: [port2] })
		.on('error', () => realExit(0))
		.unref();
	let taken = 0;
	const send = (buf) => fs.writeSync(CTL, buf);
	const next = () => {
		Atomics.wait(arrived, 0, taken);
		taken++;
		return receiveMessageOnPort(port1).message;
	};

	const writeNb = (value) => {
		const results = value === undefined ? [] : [{ text: util.inspect(value), is_main_result: true }];
		try {
			fs.writeFileSync(nbPath, JSON.stringify({ results, error: nbError }));
		} catch (e) {
			process.stderr.write(`saferun: the run's results could not be written: ${e}\n`);
		}
		nbError = null;
	};

	const run = async (code) => {
		failed = false;
		nbError = null;
		process.exitCode = undefined;
		let status = 0;
		let value;
		try {
			value = vm.runInThisContext(code, { filename: 'main.js' });
			if (value && typeof value.then === 'function') value = await value;
		} catch (e) {
			if (e instanceof Exit) {
				status = Number(e.code) || 0;
			} else {
				report(e);
				status = 1;
			}
		}
		// Callbacks already due (a resolved promise's, an I/O's) run now.
		await new Promise((resolve) => setImmediate(resolve));
		if (status === 0 && failed) status = 1;
		if (status === 0 && process.exitCode) status = Number(process.exitCode) || 0;
		if (nbPath) writeNb(status === 0 ? value : undefined);
		return status & 0xff;
	};

	(async () => {
		send(Buffer.from('R'));
		for (;;) {
			const status = await run(next());
			const done = Buffer.alloc(5);
			done.write('D');
			done.writeInt32LE(status, 1);
			send(done);
		}
	})();
})();
