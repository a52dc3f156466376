// runCode("print(1)") through E2B's SDK against saferund's E2B listener,
// next to POST /v1/run and a session run of the same code over TCP
// (docs/benchmarks.md, "E2B's SDK"). Not a test: it prints a Markdown
// table. Needs E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY (a saferund
// token) and SAFERUND_URL (saferund's --listen, same token).
//   node tests/e2b/bench.mjs [RUNS]
import { Sandbox } from '@e2b/code-interpreter'

const runs = Number(process.argv[2] || 50)
const base = process.env.SAFERUND_URL
const auth = { Authorization: 'Bearer ' + process.env.E2B_API_KEY, 'Content-Type': 'application/json' }

async function time(fn) {
  await fn() // once before: the interpreter is up
  const ms = []
  for (let i = 0; i < runs; i++) {
    const t = performance.now()
    await fn()
    ms.push(performance.now() - t)
  }
  ms.sort((a, b) => a - b)
  const q = (p) => ms[Math.min(ms.length - 1, Math.floor(p * ms.length))].toFixed(1)
  return { p50: q(0.5), p90: q(0.9), min: ms[0].toFixed(1) }
}

async function post(path, body) {
  const r = await fetch(base + path, { method: 'POST', headers: auth, body: JSON.stringify(body) })
  const j = await r.json()
  if (!r.ok || j.stdout !== '1\n') throw new Error(`${path}: ${r.status} ${JSON.stringify(j)}`)
  return j
}

const sbx = await Sandbox.create()
const rows = []
rows.push(['E2B SDK `runCode("print(1)")` (a context\'s kernel)', await time(async () => {
  const ex = await sbx.runCode('print(1)')
  if (ex.logs.stdout.join('') !== '1\n') throw new Error(JSON.stringify(ex))
})])
const s = await (await fetch(base + '/v1/sessions', { method: 'POST', headers: auth,
  body: JSON.stringify({ stateful: true }) })).json()
rows.push(['`POST /v1/sessions/{id}/run` (stateful session)', await time(() =>
  post(`/v1/sessions/${s.session_id}/run`, { code: 'print(1)' }))])
rows.push(['`POST /v1/run` (a fresh sandbox each)', await time(() => post('/v1/run', { code: 'print(1)' }))])
await fetch(base + '/v1/sessions/' + s.session_id, { method: 'DELETE', headers: auth })
await sbx.kill()
console.log(`| path | runs | p50 ms | p90 ms | min ms |\n|---|---:|---:|---:|---:|`)
for (const [name, t] of rows) console.log(`| ${name} | ${runs} | ${t.p50} | ${t.p90} | ${t.min} |`)
process.exit(0)
