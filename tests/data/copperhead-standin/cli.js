#!/usr/bin/env node
// A stand-in for the copperhead CLI, for the runner tests: no model, no network.
//
// It accepts the command lines the runner uses (`--version`, `--repo <dir> --json do "<prompt>"
// --model <id> --max-turns <n>`, `--repo <dir> init --no-hooks`), acts on the sandbox the way
// copperhead does (edits, a git commit, a transcript under .copperhead/runs/<stamp>/) and
// records how it was invoked — argv, stdin, environment variable NAMES, the config it found —
// in a file outside the sandbox, so a test can check the adapter drove it exactly as specified.
//
// Behaviour comes from `standin.json` beside this file (all optional):
//   record       file to append one JSON line per invocation to
//   version      what `--version` prints (default 0.9.0-standin)
//   behaviour    "auto" (default: a "rename net A to B" prompt renames, anything else refuses),
//                "sleep" (write run-start, start a child that ignores SIGTERM, never finish),
//                "secret-file" / "secret-commit" (rename, and leak a planted key into a file /
//                the commit message), "crash" (write run-start, exit 3 without run-end)
//   byPrompt     {prompt: behaviour}: per-task behaviour within one suite run
//   tokensIn, tokensOut   what run-end reports
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
      COPPERHEAD_PROMPT_VARIANT: process.env.COPPERHEAD_PROMPT_VARIANT || null,
      COPPERHEAD_TOOLS: process.env.COPPERHEAD_TOOLS || null,
      GIT_AUTHOR_EMAIL: process.env.GIT_AUTHOR_EMAIL || null,
    },
    ...extra,
  };
  fs.appendFileSync(settings.record, JSON.stringify(entry) + "\n");
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
  git(repo, ["add", "--", ...changed]);
  git(repo, ["commit", "-q", "-m", message]);
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
    const child = spawn(process.execPath, ["-e", "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000);"], { stdio: "ignore" });
    record({ command: "do", config, childPid: child.pid, transcript: t.file });
    setInterval(() => {}, 1000);
    return;
  }
  record({ command: "do", config, transcript: t.file });
  if (behaviour === "crash") process.exit(3);
  const m = /^rename net (\S+) to (\S+)$/.exec(prompt || "");
  if (m) {
    const turns = rename(repo, t, config, m[1], m[2], behaviour);
    runEnd(t, "done", turns, maxTurns, config);
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
