// E2B's own SDKs against saferund's E2B listener (tests/api/test_e2b.py):
// many calls, one JSON line of what each gave on stdout, for the Python
// test to assert on. E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY come from
// the test; E2B_OTHER_KEY is another tenant's key.
import { Sandbox } from '@e2b/code-interpreter'

const out = {}
const errName = (e) => (e && (e.name || e.constructor?.name)) || String(e)
// step(name, fn): out[name] = what fn returned, or {error: name, message}
async function step(name, fn) {
  try {
    out[name] = await fn()
  } catch (e) {
    out[name] = { error: errName(e), message: String(e?.message ?? e).slice(0, 300) }
  }
}
const plain = (ex) => ({
  text: ex.text,
  results: ex.results.map((r) => ({
    main: r.isMainResult, text: r.text, html: r.html, png: r.png ? r.png.slice(0, 8) : undefined,
    png_len: r.png ? r.png.length : 0, formats: r.formats()
  })),
  stdout: ex.logs.stdout.join(''),
  stderr: ex.logs.stderr.join(''),
  error: ex.error ? { name: ex.error.name, value: ex.error.value, traceback: ex.error.traceback } : null,
  count: ex.executionCount
})

const sb = await Sandbox.create({ metadata: { suite: 'e2b', who: 'a' }, timeoutMs: 120_000 })
out.id = sb.sandboxId
await step('first', async () => plain(await sb.runCode('x = 41\nprint("hi")\nx + 1')))
await step('state', async () => plain(await sb.runCode('x')))
await step('error', async () => plain(await sb.runCode('def f():\n    return 1/0\nf()')))
await step('dataframe', async () =>
  plain(await sb.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})')))
await step('figure', async () =>
  plain(await sb.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()')))
await step('rejected', async () => plain(await sb.runCode('import subprocess\nsubprocess.run(["id"])')))
await step('callbacks', async () => {
  const seen = []
  const ex = await sb.runCode('print("one")\nimport sys\nprint("two", file=sys.stderr)\n7', {
    onStdout: (m) => seen.push(['stdout', m.line]),
    onStderr: (m) => seen.push(['stderr', m.line]),
    onResult: (r) => seen.push(['result', r.text])
  })
  return { seen, count: ex.executionCount }
})

// Contexts: separate interpreters, the same files.
await step('contexts', async () => {
  const c = await sb.createCodeContext()
  await sb.runCode('open("shared.txt", "w").write("from default")')
  const there = plain(await sb.runCode('y = 5\nopen("shared.txt").read()', { context: c }))
  const xMissing = plain(await sb.runCode('x', { context: c }))
  const list = (await sb.listCodeContexts()).map((k) => k.id)
  await sb.restartCodeContext(c)
  const afterRestart = plain(await sb.runCode('y', { context: c }))
  await sb.removeCodeContext(c)
  const listAfter = (await sb.listCodeContexts()).map((k) => k.id)
  let removedRun
  try {
    await sb.runCode('1', { context: c })
    removedRun = 'ran'
  } catch (e) {
    removedRun = errName(e)
  }
  return { id: c.id, language: c.language, cwd: c.cwd, there, xMissing, list, afterRestart,
    listAfter, removedRun }
})

// Output streams while the run goes on: the run waits for a file that a
// second context writes only once the first line has arrived.
await step('streaming', async () => {
  const c2 = await sb.createCodeContext()
  const order = []
  let poke
  const ex = await sb.runCode(
    'import os, time\nprint("waiting", flush=True)\n' +
      'end = time.time() + 15\n' +
      'while not os.path.exists("go") and time.time() < end:\n    time.sleep(0.02)\n' +
      'print("released", os.path.exists("go"))',
    {
      onStdout: (m) => {
        order.push(m.line.trim())
        if (m.line.includes('waiting') && !poke)
          poke = sb.runCode('open("go", "w").close()', { context: c2 }).then(() => order.push('poked'))
      }
    })
  await poke
  await sb.removeCodeContext(c2)
  return { order, stdout: ex.logs.stdout.join('') }
})

// timeoutMs ends that run (the interpreter with it), not the sandbox.
await step('run_timeout', async () => {
  let e1
  try {
    await sb.runCode('import time\ntime.sleep(60)', { timeoutMs: 1500 })
    e1 = 'no error'
  } catch (e) {
    e1 = errName(e)
  }
  const next = plain(await sb.runCode('"alive"'))
  return { error: e1, next, running: await sb.isRunning() }
})

// Control API.
await step('info', async () => {
  const i = await Sandbox.getInfo(sb.sandboxId)
  return { ...i, startedAt: i.startedAt.getTime(), endAt: i.endAt.getTime(), now: Date.now() }
})
await step('set_timeout', async () => {
  await sb.setTimeout(600_000)
  const i = await sb.getInfo()
  return { endAt: i.endAt.getTime(), now: Date.now() }
})
const sb2 = await Sandbox.create({ metadata: { suite: 'e2b', who: 'b' } })
await step('isolated', async () => {
  await sb.runCode('x = "a"')
  await sb2.runCode('x = "b"')
  const a = plain(await sb.runCode('x'))
  const bx = plain(await sb2.runCode('x'))
  const bfile = plain(await sb2.runCode('import os\nos.path.exists("shared.txt")'))
  // sb's id with sb2's token
  const r = await fetch(process.env.E2B_SANDBOX_URL + '/execute', {
    method: 'POST',
    headers: { 'E2b-Sandbox-Id': sb.sandboxId, 'E2b-Sandbox-Port': '49999',
      'X-Access-Token': sb2.envdAccessToken, 'Content-Type': 'application/json' },
    body: JSON.stringify({ code: 'x' })
  })
  return { a: a.text, b: bx.text, bfile: bfile.text, crossStatus: r.status }
})
await step('list', async () => {
  const all = await Sandbox.list({ query: { metadata: { suite: 'e2b' } } }).nextItems()
  const onlyB = await Sandbox.list({ query: { metadata: { who: 'b' } } }).nextItems()
  const p = Sandbox.list({ query: { metadata: { suite: 'e2b' } }, limit: 1 })
  const page1 = await p.nextItems()
  const hasNext = p.hasNext
  const page2 = await p.nextItems()
  return { all: all.map((s) => s.sandboxId).sort(), onlyB: onlyB.map((s) => s.sandboxId),
    page1: page1.map((s) => s.sandboxId), hasNext, page2: page2.map((s) => s.sandboxId),
    hasNextAfter: p.hasNext, state: all[0]?.state, metadata: onlyB[0]?.metadata }
})
await step('other_tenant', async () => {
  const opts = { apiKey: process.env.E2B_OTHER_KEY }
  const seen = await Sandbox.list({ ...opts }).nextItems()
  let info
  try {
    await Sandbox.getInfo(sb.sandboxId, opts)
    info = 'found'
  } catch (e) {
    info = errName(e)
  }
  return { seen: seen.map((s) => s.sandboxId), info, killed: await Sandbox.kill(sb.sandboxId, opts) }
})
await step('wrong_key', async () => {
  try {
    await Sandbox.create({ apiKey: 'not-a-saferund-token-0000' })
    return 'created'
  } catch (e) {
    return errName(e)
  }
})

// One sandbox: commands enter the default context's kernel, so they share
// its /tmp, processes and network with runCode.
await step('shared', async () => {
  await sb.runCode("open('/tmp/from-py.txt', 'w').write('py wrote')")
  const seenByCmd = (await sb.commands.run('cat /tmp/from-py.txt')).stdout
  await sb.commands.run('echo cmd wrote > /tmp/from-cmd.txt')
  const seenByPy = plain(await sb.runCode("open('/tmp/from-cmd.txt').read()")).text
  const h = await sb.commands.run('sleep 30', { background: true })
  const listed = (await sb.commands.list()).map((p) => p.pid).includes(h.pid)
  // (the guard keeps Python out of /proc: it finds the command by its pid,
  // the leader of its own process group)
  const pgid = plain(await sb.runCode(`import os\nos.getpgid(${h.pid})`))
  const pyPid = plain(await sb.runCode('import os\nos.getpid()')).text
  const pyCmdline = (await sb.commands.run(`tr '\\0' ' ' < /proc/${pyPid}/cmdline`)).stdout
  await h.kill()
  return { seenByCmd, seenByPy, pid: h.pid, listed, pgid: pgid.text ?? pgid.error, pyCmdline }
})

// runCode's language: a JavaScript context (a node kernel, state kept) and
// bash (a command in the sandbox: it sees runCode's /tmp).
await step('languages', async () => {
  const js = plain(await sb.runCode('var n = 20; console.log("js", n + 1); n * 2', { language: 'js' }))
  const js2 = plain(await sb.runCode('n + 1', { language: 'javascript' }))
  const jsErr = plain(await sb.runCode('null.x', { language: 'js' }))
  const bash = plain(await sb.runCode('echo "bash $((6 * 7))"; cat /tmp/from-py.txt', { language: 'bash' }))
  const bashErr = plain(await sb.runCode('echo no >&2; exit 3', { language: 'bash' }))
  let unknown
  try {
    await sb.runCode('1', { language: 'ts' })
    unknown = 'ran'
  } catch (e) {
    unknown = { error: errName(e), message: String(e?.message ?? e).slice(0, 300) }
  }
  const c = await sb.createCodeContext({ language: 'bash' })
  const inCtx = plain(await sb.runCode('echo ctx', { context: c }))
  await sb.removeCodeContext(c)
  const contexts = (await sb.listCodeContexts()).map((x) => [x.id, x.language])
  return { js, js2, jsErr, bash, bashErr, unknown, ctxLanguage: c.language, inCtx: inCtx.stdout, contexts }
})

// kill (before the pause: then only sb's kernels are left to look at).
await step('kill', async () => {
  const k = await sb2.kill()
  const again = await Sandbox.kill(sb2.sandboxId)
  let info
  try {
    await Sandbox.getInfo(sb2.sandboxId)
    info = 'found'
  } catch (e) {
    info = errName(e)
  }
  return { k, again, info, running: await sb2.isRunning() }
})
// Pause keeps the interpreter's memory and freezes a running command (its
// ticks stop while paused and go on after); connect resumes.
await step('pause', async () => {
  await sb.runCode('kept = [1, 2, 3]')
  const ticker = await sb.commands.run('while :; do date +%s%3N >> ticks.txt; sleep 0.05; done',
    { background: true })
  const ticks = async () => (await sb.files.read('ticks.txt').catch(() => '')).split('\n').filter(Boolean).map(Number)
  const t0 = Date.now()
  while (Date.now() - t0 < 5000 && (await ticks()).length < 2) await new Promise((r) => setTimeout(r, 50))
  const paused = await sb.pause()
  const pausedAt = Date.now()
  const again = await Sandbox.pause(sb.sandboxId)
  const info = await sb.getInfo()
  const listed = (await Sandbox.list({ query: { state: ['paused'] } }).nextItems()).map((s) => s.sandboxId)
  const running = await sb.isRunning()
  if (process.env.E2B_PAUSE_HANDSHAKE) {
    // the test looks at the sandbox's cgroups now, then says go on
    console.log(JSON.stringify({ paused: sb.sandboxId }))
    await new Promise((resolve) => process.stdin.once('data', resolve))
    process.stdin.pause()
  }
  await new Promise((r) => setTimeout(r, 600))
  let run
  try {
    await sb.runCode('1')
    run = 'ran'
  } catch (e) {
    run = errName(e)
  }
  const resumedAt = Date.now()
  const back = await Sandbox.connect(sb.sandboxId, { timeoutMs: 60_000 })
  const after = plain(await back.runCode('sum(kept)'))
  const info2 = await sb.getInfo()
  const t1 = Date.now()
  while (Date.now() - t1 < 5000 && !(await ticks()).some((t) => t > resumedAt))
    await new Promise((r) => setTimeout(r, 50))
  await ticker.kill()
  return { paused, again, state: info.state, listed, running, run, after: after.text,
    state2: info2.state, pausedAt, resumedAt, ticks: await ticks() }
})

await step('expires', async () => {
  const s = await Sandbox.create({ timeoutMs: 1000 })
  const t0 = Date.now()
  while (Date.now() - t0 < 15000 && (await s.isRunning()))
    await new Promise((r) => setTimeout(r, 100))
  return { running: await s.isRunning(), killAfter: await Sandbox.kill(s.sandboxId) }
})
await sb.kill()
console.log(JSON.stringify(out))
process.exit(0) // a failed call's request timer would hold node for a minute
