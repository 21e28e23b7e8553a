// skillbox runner for JavaScript skills (package.json / OwliaBot format).
// argv: node runner.mjs <module path relative to the skill folder> <tool name>
// Reads the tool.invoke request from stdin, calls tools[name](args, context), and speaks
// the jsonrpc stdio protocol: context.fetch/sign/readFile/runSkill become requests with ids >= 1.
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";

const [, , mainRel, toolName] = process.argv;
const out = (msg) => process.stdout.write(JSON.stringify({ jsonrpc: "2.0", ...msg }) + "\n");
const pending = new Map();
let nextId = 1;
let invoked = false;

function call(method, params) {
  const id = nextId++;
  out({ id, method, params });
  return new Promise((res, rej) => pending.set(id, { res, rej }));
}

async function invoke(params) {
  const mod = await import(pathToFileURL(resolve(process.cwd(), mainRel)).href);
  const fn = mod.tools && mod.tools[toolName];
  if (typeof fn !== "function") {
    throw new Error(`module ${mainRel} exports no function tools.${toolName}`);
  }
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!["PATH", "LANG", "HOME", "TMPDIR"].includes(k)) env[k] = v;
  }
  const context = {
    env,
    meta: { skill: process.env.SKILLBOX_SKILL, tool: toolName, callId: params.call_id },
    fetch: (url, init = {}) =>
      call("fetch", { url, method: init.method || "GET", headers: init.headers || {}, body: init.body }),
    sign: (type, data) => call("sign", { type, data }),
    readFile: (path) => call("readFile", { path }).then((r) => r.content),
    runSkill: (tool, args = {}) => call("runSkill", { tool, args }),
  };
  const r = await fn(params.args, context);
  if (r && typeof r === "object" && "success" in r) {
    if (r.success) return r.data ?? null;
    throw new Error(r.error || "tool reported failure");
  }
  return r ?? null;
}

const rl = createInterface({ input: process.stdin });
rl.on("line", (line) => {
  if (!line.trim()) return;
  const msg = JSON.parse(line);
  if (!invoked && msg.method === "tool.invoke") {
    invoked = true;
    invoke(msg.params).then(
      (result) => { out({ id: 0, result }); process.exit(0); },
      (e) => { out({ id: 0, error: { code: 1, message: String(e && e.message || e) } }); process.exit(0); },
    );
  } else if (pending.has(msg.id)) {
    const p = pending.get(msg.id);
    pending.delete(msg.id);
    if (msg.error) p.rej(Object.assign(new Error(msg.error.message), { code: msg.error.code }));
    else p.res(msg.result);
  }
});
