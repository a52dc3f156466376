// E2B's JS SDK (npm `e2b`, pinned in package.json) against saferund's envd
// (tests/api/test_e2b_envd.py): files, watch and commands through the
// Connect protocol and /files, one JSON object on stdout with what each
// step gave. E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY come from the
// test; NOCMD_TEMPLATE names a policy with commands.enabled false.
import { Sandbox } from 'e2b'

const out = {}
const errName = (e) => (e && (e.name || e.constructor?.name)) || String(e)
async function step(name, fn) {
  try {
    out[name] = await fn()
  } catch (e) {
    out[name] = { error: errName(e), message: String(e?.message ?? e).slice(0, 400) }
  }
}
const failure = async (fn) => {
  try {
    await fn()
    return 'no error'
  } catch (e) {
    return { error: errName(e), code: e?.code, message: String(e?.message ?? e).slice(0, 300), exitCode: e?.exitCode,
      stdout: e?.stdout, stderr: e?.stderr }
  }
}

const sb = await Sandbox.create({ timeoutMs: 120_000 })
const sb2 = await Sandbox.create({ timeoutMs: 120_000 })

await step('files', async () => {
  const info = await sb.files.write('/home/user/a.txt', 'hello envd')
  const text = await sb.files.read('/home/user/a.txt')
  const relative = await sb.files.read('a.txt')
  const made = await sb.files.makeDir('/home/user/d/e')
  const madeAgain = await sb.files.makeDir('/home/user/d/e')
  const moved = await sb.files.rename('/home/user/a.txt', '/home/user/d/b.txt')
  const list = (await sb.files.list('/home/user')).map((e) => [e.name, e.type]).sort()
  const deep = (await sb.files.list('/home/user', { depth: 3 })).map((e) => e.path).sort()
  const stat = await sb.files.getInfo('/home/user/d/b.txt')
  const existsMoved = [await sb.files.exists('/home/user/a.txt'), await sb.files.exists('/home/user/d/b.txt')]
  await sb.files.remove('/home/user/d')
  const afterRemove = await sb.files.exists('/home/user/d/b.txt')
  const missing = await failure(() => sb.files.read('/home/user/nope.txt'))
  return { info: { name: info.name, path: info.path, type: info.type }, text, relative, made, madeAgain,
    moved: { name: moved.name, path: moved.path, type: moved.type }, list, deep,
    stat: { name: stat.name, type: stat.type, size: stat.size, permissions: stat.permissions, mtime: !!stat.modifiedTime },
    existsMoved, afterRemove, missing }
})

await step('binary', async () => {
  const bytes = new Uint8Array(1024)
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7) & 0xff
  const many = await sb.files.write([
    { path: '/home/user/bin/one.bin', data: bytes.buffer },
    { path: '/home/user/bin/two.bin', data: new Blob([bytes.slice(0, 300)]) },
    { path: '/home/user/bin/three.txt', data: 'three' }
  ])
  const back = await sb.files.read('/home/user/bin/one.bin', { format: 'bytes' })
  const two = await sb.files.read('/home/user/bin/two.bin', { format: 'bytes' })
  let same = back.length === bytes.length
  for (let i = 0; same && i < bytes.length; i++) same = back[i] === bytes[i]
  return { written: many.map((f) => f.path).sort(), same, twoLen: two.length, twoFirst: Array.from(two.slice(0, 4)) }
})

await step('watch', async () => {
  await sb.files.makeDir('/home/user/w')
  const events = []
  const h = await sb.files.watchDir('/home/user/w', (e) => events.push([e.type, e.name]))
  await sb.files.write('/home/user/w/new.txt', 'x')
  await sb.files.remove('/home/user/w/new.txt')
  const end = Date.now() + 5000
  while (Date.now() < end && !events.some((e) => e[0] === 'remove')) await new Promise((r) => setTimeout(r, 50))
  await h.stop()
  return events
})

// The polling form of a watcher (E2B's Python SDK uses it), through the
// SDK's own Connect client.
await step('pollWatch', async () => {
  await sb.files.makeDir('/home/user/pw')
  const { watcherId } = await sb.files.rpc.createWatcher({ path: '/home/user/pw' })
  await sb.files.write('/home/user/pw/f.txt', 'x')
  const got = (await sb.files.rpc.getWatcherEvents({ watcherId })).events.map((e) => [e.type, e.name])
  const drained = (await sb.files.rpc.getWatcherEvents({ watcherId })).events.length
  await sb.files.rpc.removeWatcher({ watcherId })
  const gone = await failure(() => sb.files.rpc.getWatcherEvents({ watcherId }))
  return { got, drained, gone: [gone.error, gone.code] }
})

await step('traversal', async () => ({
  dotdot: await failure(() => sb.files.read('/home/user/../../etc/passwd')),
  outside: await failure(() => sb.files.read('/etc/passwd')),
  list_outside: await failure(() => sb.files.list('/etc')),
  write_outside: await failure(() => sb.files.write('/tmp/x.txt', 'x')),
  nul_read: await failure(() => sb.files.read('/home/user/a.txt\u0000.png')),
  nul_stat: await failure(() => sb.files.rpc.stat({ path: '/home/user/a\u0000b' }))
}))

await step('run', async () => {
  const ok = await sb.commands.run('echo out; echo err >&2; pwd; id -u; ls')
  const bad = await failure(() => sb.commands.run('echo partial; echo oops >&2; exit 3'))
  const envCwd = await sb.commands.run('echo "$FOO"; pwd', { envs: { FOO: 'bar baz' }, cwd: '/home/user/bin' })
  return { ok: { exitCode: ok.exitCode, stdout: ok.stdout, stderr: ok.stderr }, bad, envCwd: envCwd.stdout }
})

await step('stream', async () => {
  const seen = []
  await sb.commands.run('echo one; sleep 0.3; echo two', { onStdout: (d) => seen.push(d) })
  return seen
})

await step('stdin', async () => {
  const h = await sb.commands.run('cat', { background: true, stdin: true })
  await h.sendStdin('hello stdin\n')
  await h.closeStdin()
  const r = await h.wait()
  return { exitCode: r.exitCode, stdout: r.stdout }
})

await step('kill', async () => {
  const h = await sb.commands.run('sleep 30', { background: true })
  const listed = (await sb.commands.list()).map((p) => p.pid).includes(h.pid)
  const killed = await sb.commands.kill(h.pid)
  const waited = await failure(() => h.wait())
  const after = (await sb.commands.list()).map((p) => p.pid).includes(h.pid)
  const again = await sb.commands.kill(h.pid)
  return { pid: h.pid, listed, killed, waited, after, again }
})

// A command outlives its client: connect() picks its output up again.
await step('connect', async () => {
  const h = await sb.commands.run('read x; echo "got $x"', { background: true, stdin: true })
  await h.disconnect()
  const again = await sb.commands.connect(h.pid)
  await sb.commands.sendStdin(h.pid, 'later\n')
  const r = await again.wait()
  return { stdout: r.stdout, exitCode: r.exitCode }
})

await step('background', async () => {
  const h = await sb.commands.run('sleep 0.2; echo done > bg.txt; echo bg', { background: true })
  const r = await h.wait()
  return { stdout: r.stdout, file: await sb.files.read('/home/user/bg.txt') }
})

await step('confinement', async () => {
  const shadow = await failure(() => sb.commands.run('cat /etc/shadow'))
  // 120 background sleeps against a pids limit of 32: the shell doing it
  // dies at the first fork the limit refuses; once the sleeps end, count.
  const bomb = await sb.commands.run(
    "sh -c 'i=0; while [ $i -lt 120 ]; do sleep 2 & echo x; i=$((i+1)); done' >/tmp/started 2>/tmp/err; " +
      'sleep 2.5; echo started=$(wc -l </tmp/started); cat /tmp/err',
    { timeoutMs: 30_000 })
  const alive = await sb.commands.run('echo still here')
  return { shadow, bomb: bomb.stdout, alive: alive.stdout }
})

await step('isolated', async () => {
  await sb.files.write('/home/user/only-a.txt', 'a')
  const h = await sb.commands.run('sleep 20', { background: true })
  const r = {
    file: await sb2.files.exists('/home/user/only-a.txt'),
    ls: (await sb2.commands.run('ls /work; ps -e -o pid=,comm= 2>/dev/null || true')).stdout,
    procs: (await sb2.commands.list()).map((p) => p.pid)
  }
  await h.kill()
  return r
})

if (process.env.NOCMD_TEMPLATE) {
  await step('nocmd', async () => {
    const s3 = await Sandbox.create(process.env.NOCMD_TEMPLATE, { timeoutMs: 60_000 })
    const r = { run: await failure(() => s3.commands.run('id')), files: await s3.files.exists('/home/user') }
    await s3.kill()
    return r
  })
}

await sb.kill()
await sb2.kill()
console.log(JSON.stringify(out))
