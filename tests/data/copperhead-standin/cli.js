#!/usr/bin/env node
// A stand-in for the copperhead CLI, for the runner tests: no model, no network.
//
// It accepts the command lines the runner uses (`--version`, `--repo <dir> --json do "<prompt>"
// --model <id> --max-turns <n>`, `--repo <dir> init --no-hooks`), acts on the sandbox the way
// copperhead does (edits, a git commit, a transcript under .copperhead/runs/<stamp>/) and
// records how it was invoked — argv, stdin, environment variable NAMES, the config it found —
// so a test can check the adapter drove it exactly as specified: in the `record` file when it can
// write there (an unsandboxed run), else in `.git/standin-calls.jsonl` of the sandbox it was given
// (a sandboxed run sees nothing outside its sandbox; the test keeps the sandboxes to read them).
//
// Behaviour comes from `standin.json` beside this file (all optional):
//   record       file to append one JSON line per invocation to
//   version      what `--version` prints (default 0.9.0-standin)
//   behaviour    "auto" (default: a "rename net A to B" prompt renames, anything else refuses),
//                "sleep" (write run-start, start a setsid child that ignores SIGTERM, never finish),
//                "secret-file" / "secret-commit" (rename, and leak a planted key into a file /
//                the commit message), "crash" (write run-start, exit 3 without run-end),
//                "big-commit" (rename, then commit a random blob of `bigCommitBytes` and remove it)
//   byPrompt     {prompt: behaviour}: per-task behaviour within one suite run
//   tokensIn, tokensOut   what run-end reports
//   marker       a word in the "sleep" child's command line (default cbledger-standin-sleeper)
//   hostile      for behaviour "hostile": what a hostile agent tries, each recorded as one line
//                of `.git/attempts.jsonl` in the sandbox — {project, task, ledger,
//                python, retract, secretFile, bigFileMb, forks, marker} (see `hostile` below)
"use strict";

const fs = require("fs");
const path = require("path");
const { spawn, execFileSync } = require("child_process");

const started = new Date();
const settings = readJson(path.join(__dirname, "standin.json")) || {};
const argv = process.argv.slice(2);

function readJson(file) {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (err) {
    return null;
  }
}

function stdinState() {
  let target = null;
  try {
    target = fs.readlinkSync("/proc/self/fd/0");
  } catch (err) {
    target = null;
  }
  let bytes = null;
  try {
    bytes = fs.readFileSync(0).length;
  } catch (err) {
    bytes = null;
  }
  return { isTTY: Boolean(process.stdin.isTTY), target, bytes };
}

function record(extra) {
  if (!settings.record) return;
  const entry = {
    argv,
    cwd: process.cwd(),
    pid: process.pid,
    stdin: stdinState(),
    envNames: Object.keys(process.env).sort(),
    env: {
      COPPERHEAD_BASE_URL: process.env.COPPERHEAD_BASE_URL || null,
      OPENAI_BASE_URL: process.env.OPENAI_BASE_URL || null,
      COPPERHEAD_PROMPT_VARIANT: process.env.COPPERHEAD_PROMPT_VARIANT || null,
      COPPERHEAD_TOOLS: process.env.COPPERHEAD_TOOLS || null,
      GIT_AUTHOR_EMAIL: process.env.GIT_AUTHOR_EMAIL || null,
    },
    ...extra,
  };
  const line = JSON.stringify({ ...entry, at: Date.now() }) + "\n";
  try {
    fs.appendFileSync(settings.record, line);
  } catch (err) {
    const repo = option("--repo");
    if (repo) fs.appendFileSync(path.join(repo, ".git", "standin-calls.jsonl"), line);
  }
}

function option(name) {
  const i = argv.indexOf(name);
  return i >= 0 && i + 1 < argv.length ? argv[i + 1] : null;
}

function stamp(when) {
  return when.toISOString().replace(/[:.]/g, "-");
}

function git(repo, args) {
  return execFileSync("git", ["-c", "user.name=copperhead", "-c", "user.email=copperhead@localhost", ...args], {
    cwd: repo,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  }).trim();
}

class Transcript {
  constructor(repo) {
    this.file = path.join(repo, ".copperhead", "runs", stamp(started), "transcript.jsonl");
    fs.mkdirSync(path.dirname(this.file), { recursive: true });
  }
  write(type, data) {
    fs.appendFileSync(this.file, JSON.stringify({ ts: new Date().toISOString(), type, data }) + "\n");
  }
}

function runStart(t, repo, prompt, model, maxTurns, config) {
  let head = null;
  try {
    head = git(repo, ["rev-parse", "HEAD"]);
  } catch (err) {
    head = null;
  }
  t.write("run-start", {
    request: prompt,
    model,
    provider: model.startsWith("compat:") ? "openai-compat" : "standin",
    modelSource: "flag",
    runId: stamp(started),
    startedAt: started.toISOString(),
    command: "do",
    interactive: false,
    stage: null,
    brief: null,
    versions: {
      copperhead: settings.version || "0.9.0-standin",
      installPath: __dirname,
      kicadCli: null,
      node: process.version,
      platform: `${process.platform}-${process.arch}`,
    },
    config: {
      schematic: config.schematic,
      board: config.board,
      docs: config.docs,
      maxTurns,
      maxRepairCycles: config.maxRepairCycles ?? null,
      budgets: config.budgets || {},
    },
    git: { commit: head, branch: "main", dirty: false, uncommittedFiles: [], preCommitHookInstalled: false },
    openConstraints: [],
    priorRuns: [],
  });
}

function runEnd(t, exitPath, turns, maxTurns, config) {
  const tokensIn = settings.tokensIn ?? 12345;
  const tokensOut = settings.tokensOut ?? 678;
  const perTurn = [];
  for (let i = 1; i <= turns; i++) perTurn.push({ turn: i, in: Math.floor(tokensIn / turns), out: Math.floor(tokensOut / turns) });
  t.write("run-end", {
    exitPath,
    turnsUsed: turns,
    maxTurns,
    repairCyclesUsed: 0,
    maxRepairCycles: config.maxRepairCycles ?? 0,
    tokensIn,
    tokensOut,
    perTurn,
    durationMs: Date.now() - started.getTime(),
  });
}

function plantedKey() {
  // Assembled at run time so this file never holds a credential-shaped literal.
  return ["sk", "standin" + "0123456789".repeat(3)].join("-");
}

function awsKey() {
  return ["AKIA", "STANDIN0123456789".slice(0, 16)].join("");
}

function pemBlock() {
  const kind = ["OPENSSH", "PRIVATE", "KEY"].join(" ");
  return `-----BEGIN ${kind}-----\nb3BlbnNzaC1rZXktdjEAAAAAstandinAAAA\n-----END ${kind}-----`;
}

function urlCredential() {
  return ["postgres://deploy", "hunter2standin@db.example.invalid/app"].join(":");
}

function rename(repo, t, config, from, to, leak) {
  const sch = path.join(repo, config.schematic);
  const text = fs.readFileSync(sch, "utf8");
  const label = `(label "${from}"`;
  t.write("assistant", { text: `Renaming net ${from} to ${to}.`, toolCalls: [{ id: "c1", name: "edit_file", args: { path: config.schematic } }] });
  fs.writeFileSync(sch, text.split(label).join(`(label "${to}"`));
  t.write("tool", { name: "edit_file", args: { path: config.schematic }, result: "ok" });
  const changed = [config.schematic];
  const pinout = path.join(repo, config.docs || "docs", "PINOUT.md");
  if (fs.existsSync(pinout)) {
    fs.writeFileSync(pinout, fs.readFileSync(pinout, "utf8").replace(new RegExp(`\\b${from}\\b`, "g"), to));
    changed.push(path.relative(repo, pinout));
  }
  let message = `copperhead: rename net ${from} to ${to}`;
  if (leak === "secret-file") {
    const notes = path.join(repo, "docs", "NOTES.md");
    fs.mkdirSync(path.dirname(notes), { recursive: true });
    fs.writeFileSync(notes, `debug: provider key ${plantedKey()}\n`);
    changed.push("docs/NOTES.md");
  } else if (leak === "secret-commit") {
    message += `\n\nused key ${plantedKey()}`;
  }
  let author = [];
  let env = process.env;
  if (leak === "secret-everywhere") {
    // a key in a file's name (one with an ANSI escape in it too), AWS, PEM and URL credentials,
    // a JSON-escaped key in the transcript, a key as the commit's author and committer
    const files = {
      [`docs/${plantedKey()}.txt`]: "named after the key\n",
      "docs/\u001b[31mred.txt": `colour and a key ${plantedKey()}\n`,
      "docs/aws.txt": `id ${awsKey()}\n`,
      "docs/deploy.pem": `${pemBlock()}\n`,
      "docs/db.txt": `url ${urlCredential()}\n`,
    };
    for (const [rel, content] of Object.entries(files)) {
      fs.writeFileSync(path.join(repo, rel), content);
      changed.push(rel);
    }
    fs.appendFileSync(t.file, '{"ts":"2026-01-01T00:00:00.000Z","type":"note","data":{"text":"' + "\\u0073" + plantedKey().slice(1) + '"}}\n');
    author = ["--author", `${plantedKey()} <${plantedKey()}@example.invalid>`];
    env = { ...process.env, GIT_COMMITTER_EMAIL: `${plantedKey()}@example.invalid` };
  }
  git(repo, ["add", "--", ...changed]);
  execFileSync("git", ["-c", "user.name=copperhead", "-c", "user.email=copperhead@localhost", "commit", "-q", ...author, "-m", message], {
    cwd: repo, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], env,
  });
  const commit = git(repo, ["rev-parse", "HEAD"]);
  t.write("run-committed", { commit, files: changed });
  return 2;
}

function refuse(t, config) {
  const key = Object.keys(config.budgets || {})[0] || "budget";
  const summary = `Refused: the change would break the recorded ${key} budget (${JSON.stringify((config.budgets || {})[key])}). Nothing was changed.`;
  t.write("assistant", { text: "Refusing.", toolCalls: [{ id: "c1", name: "finish", args: { outcome: "refuse", summary } }] });
  t.write("tool", { name: "finish", args: { outcome: "refuse", summary }, result: "refusal recorded; the working tree will be rolled back" });
  t.write("run-refused", { summary });
  return 1;
}

function attempt(repo, name, fn) {
  let result;
  try {
    result = { name, ok: true, detail: String(fn()) };
  } catch (err) {
    result = { name, ok: false, detail: String((err && err.message) || err).slice(0, 300) };
  }
  fs.appendFileSync(path.join(repo, ".git", "attempts.jsonl"), JSON.stringify(result) + "\n");
  return result;
}

// Everything the fake agent did, each attempt recorded, none of them fatal to the run.
function hostile(repo, t, config) {
  const h = settings.hostile || {};
  const changed = [];
  // the project through the parent's working directory, else through the path it is known by
  const roots = [];
  try {
    roots.push(fs.readlinkSync(`/proc/${process.ppid}/cwd`));
  } catch (err) {
    attempt(repo, "proc-parent-cwd", () => { throw err; });
  }
  if (h.project) roots.push(h.project);
  const stolen = attempt(repo, "copy-gold", () => {
    for (const root of roots) {
      const gold = path.join(root, "tasks", h.task, "gold", "files");
      if (!fs.existsSync(gold)) continue;
      for (const rel of walk(gold)) {
        fs.mkdirSync(path.dirname(path.join(repo, rel)), { recursive: true });
        fs.copyFileSync(path.join(gold, rel), path.join(repo, rel));
        changed.push(rel);
      }
      return `copied ${changed.length} file(s) from ${gold}`;
    }
    throw new Error(`no gold solution under ${JSON.stringify(roots)}`);
  });
  if (h.project) {
    attempt(repo, "write-results", () => {
      fs.writeFileSync(path.join(h.project, "results", "planted.txt"), "written by the agent\n");
      return "wrote results/planted.txt";
    });
  }
  if (h.ledger) {
    attempt(repo, "torn-tail", () => {
      fs.appendFileSync(h.ledger, '{"event": {"type": "run.retr');
      return "appended a torn line to the ledger";
    });
  }
  if (h.python && h.retract && h.project) {
    attempt(repo, "cbledger-append", () => {
      const draft = path.join(repo, ".git", "retract.json");
      fs.writeFileSync(draft, JSON.stringify({ id: `retract:${h.retract}`, type: "run.retracted", at: new Date().toISOString(),
        actor: { kind: "maintainer", name: "agent" }, body: { runId: h.retract, reason: "erased by the agent" } }));
      return execFileSync(h.python, ["-m", "cbledger", "append", draft, "--root", h.project], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    });
  }
  if (h.secretFile) {
    attempt(repo, "read-operator-file", () => fs.readFileSync(h.secretFile, "utf8").length + " bytes read");
  }
  if (h.marker) {
    attempt(repo, "setsid-child", () => {
      const child = spawn(process.execPath, ["-e", "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000);", h.marker], { stdio: "ignore", detached: true });
      child.unref();
      return `started ${child.pid}`;
    });
  }
  if (h.forks) {
    attempt(repo, "forks", () => {
      let started = 0;
      for (let i = 0; i < h.forks; i++) {
        try {
          execFileSync("/bin/sh", ["-c", "sleep 30 &"], { stdio: "ignore" });
          started++;
        } catch (err) {
          break;
        }
      }
      return `started ${started} of ${h.forks}`;
    });
  }
  if (h.bigFileMb) {
    attempt(repo, "big-file", () => {
      const chunk = require("crypto").randomBytes(1024 * 1024);
      const fd = fs.openSync(path.join(repo, "big.bin"), "w");
      let written = 0;
      try {
        for (let i = 0; i < h.bigFileMb; i++) written += fs.writeSync(fd, chunk);
      } finally {
        fs.closeSync(fd);
      }
      return `wrote ${written} bytes`;
    });
  }
  t.write("assistant", { text: "Done.", toolCalls: [{ id: "c1", name: "finish", args: { outcome: "done" } }] });
  if (stolen.ok && changed.length) {
    git(repo, ["add", "--", ...changed]);
    git(repo, ["commit", "-q", "-m", "copperhead: the change"]);
    t.write("run-committed", { commit: git(repo, ["rev-parse", "HEAD"]), files: changed });
  }
  return 2;
}

function walk(dir, prefix = "") {
  const out = [];
  for (const entry of fs.readdirSync(path.join(dir, prefix), { withFileTypes: true })) {
    const rel = path.join(prefix, entry.name);
    if (entry.isDirectory()) out.push(...walk(dir, rel));
    else out.push(rel);
  }
  return out;
}

// After an otherwise good run, what the hostile runs did to the runner's next steps.
function sabotage(repo, t, behaviour) {
  if (behaviour === "git-include") {
    // an include of itself: libgit2 gives up on the configuration, and so on the repository
    fs.appendFileSync(path.join(repo, ".git", "config"), "[include]\n\tpath = config\n");
  } else if (behaviour === "deep-transcript") {
    fs.appendFileSync(t.file, '{"ts":"2026-01-01T00:00:00.000Z","type":"note","data":' + "[".repeat(100000) + "]".repeat(100000) + "}\n");
  } else if (behaviour === "big-commit") {
    // a blob of `bigCommitBytes` random bytes committed, then removed again in a second commit:
    // only the agent's history holds it, never its end state
    const rel = path.join("docs", "blob.bin");
    fs.writeFileSync(path.join(repo, rel), require("crypto").randomBytes(settings.bigCommitBytes || 1024 * 1024));
    git(repo, ["add", "--", rel]);
    git(repo, ["commit", "-q", "-m", "copperhead: add a blob"]);
    git(repo, ["rm", "-q", "--", rel]);
    git(repo, ["commit", "-q", "-m", "copperhead: remove the blob"]);
  } else if (behaviour === "git-symlink") {
    // git's object store made a link: whatever the runner wrote there would land where it points
    const objects = path.join(repo, ".git", "objects");
    fs.renameSync(objects, path.join(repo, ".git", "objects.moved"));
    fs.symlinkSync(path.join(repo, ".git", "objects.moved"), objects);
  }
}

function doCommand() {
  const repo = option("--repo");
  const i = argv.indexOf("do");
  const prompt = argv[i + 1];
  const model = option("--model");
  const maxTurns = Number(option("--max-turns"));
  const config = readJson(path.join(repo, ".copperhead", "config.json")) || {};
  const behaviour = (settings.byPrompt || {})[prompt] || settings.behaviour || "auto";
  const t = new Transcript(repo);
  runStart(t, repo, prompt, model, maxTurns, config);
  if (behaviour === "sleep") {
    // the child leaves the harness's session (setsid) and ignores SIGTERM: only the sandbox's
    // end can stop it. `marker` names it in its command line, for the test to look for.
    const marker = settings.marker || "cbledger-standin-sleeper";
    const child = spawn(process.execPath, ["-e", "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000);", marker], { stdio: "ignore", detached: true });
    record({ command: "do", config, childPid: child.pid, transcript: t.file });
    setInterval(() => {}, 1000);
    return;
  }
  record({ command: "do", config, transcript: t.file });
  if (behaviour === "crash") process.exit(3);
  if (behaviour === "hostile") {
    const turns = hostile(repo, t, config);
    runEnd(t, "done", turns, maxTurns, config);
    return;
  }
  const m = /^rename net (\S+) to (\S+)$/.exec(prompt || "");
  if (m) {
    const turns = rename(repo, t, config, m[1], m[2], behaviour);
    runEnd(t, "done", turns, maxTurns, config);
    sabotage(repo, t, behaviour);
  } else {
    const turns = refuse(t, config);
    runEnd(t, "refused", turns, maxTurns, config);
  }
}

if (argv.includes("--version")) {
  record({ command: "version" });
  process.stdout.write(`copperhead ${settings.version || "0.9.0-standin"}\n`);
} else if (argv.includes("do")) {
  doCommand();
} else if (argv.includes("init")) {
  // Like `copperhead init --no-hooks`: scaffold the docs that are missing, touch nothing else.
  const repo = option("--repo");
  const written = [];
  for (const [name, title] of [["SPEC.md", "Spec"], ["DECISIONS.md", "Decisions"], ["CHANGELOG.md", "Changelog"]]) {
    const file = path.join(repo, "docs", name);
    if (!fs.existsSync(file)) {
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, `# ${title}\n`);
      written.push(`docs/${name}`);
    }
  }
  record({ command: "init", written });
} else {
  process.stderr.write(`copperhead stand-in: unsupported arguments ${JSON.stringify(argv)}\n`);
  process.exit(2);
}
