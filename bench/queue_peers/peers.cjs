// The peers' side of bench/queue_peers.sh: graphile-worker and pg-boss on the workloads that
// fleet_bench runs for fairgate. One command per run; each prints one line, `key: value ...`.
//
//   node peers.cjs enqueue SYSTEM CONNINFO CLIENTS SECONDS   jobs/s, one job per call
//   node peers.cjs batch   SYSTEM CONNINFO SIZE SECONDS      jobs/s, SIZE jobs per call
//   node peers.cjs work    SYSTEM CONNINFO JOBS PROCESSES VARIANT [KEYS]
//                          JOBS no-op jobs stored first (graphile-worker with KEYS: spread over
//                          KEYS named queues), then worked by PROCESSES processes at
//                          concurrency 8 each; jobs/s from the start signal until none is left,
//                          and how many runs the processes counted (exactly-once: runs == JOBS).
//                          VARIANT "plain" (defaults) or "fast" (graphile-worker: a local queue
//                          of 500 and batched completion; pg-boss: batches of 100 per fetch)
//   node peers.cjs latency SYSTEM CONNINFO COUNT             an idle worker in another process;
//                          a job stored, one at a time, until that process starts it: p50, p99 ms
//                          (after three first jobs, the slowest of which is cold_max_ms)
//
// SYSTEM is graphile or pgboss. Everything the peers need is installed by queue_peers.sh into its
// own directory (NODE_PATH).
"use strict";
const { spawn } = require("child_process");
const readline = require("readline");

const [command, system, conninfo, ...rest] = process.argv.slice(2);
const now = () => performance.timeOrigin + performance.now();  // ms, comparable across processes
const QUEUE = "noop";

function graphile() {
  const gw = require("graphile-worker");
  const quiet = new gw.Logger(() => () => {});
  return {
    async open(poolSize) {
      const utils = await gw.makeWorkerUtils({ connectionString: conninfo, logger: quiet,
                                               maxPoolSize: poolSize });
      await utils.migrate();
      return {
        add: () => utils.addJob(QUEUE, {}),
        // With `keys`, job i of the batch goes to queue "k" + ((first + i) % keys): graphile-
        // worker's named queues (one job of a queue at a time) stand for clients.
        addMany: (n, payload = {}, keys = 0, first = 0) => utils.addJobs(Array.from({ length: n },
          (_, i) => keys > 0
            ? { identifier: QUEUE, payload, queueName: "k" + ((first + i) % keys) }
            : { identifier: QUEUE, payload })),
        addTimed: () => utils.addJob(QUEUE, { t0: now() }),
        close: () => utils.release(),
      };
    },
    async pending(client) {
      return Number((await client.query(
        "SELECT count(*) FROM graphile_worker._private_jobs")).rows[0].count);
    },
    async clear(client) {
      await client.query("DELETE FROM graphile_worker._private_jobs");
    },
    async work(variant, onJob) {
      const runner = await gw.run({
        connectionString: conninfo, concurrency: 8, noHandleSignals: true, pollInterval: 1000,
        logger: quiet, taskList: { [QUEUE]: async (payload) => onJob(payload) },
        preset: variant === "fast"
          ? { worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0 } } : undefined,
      });
      return () => runner.stop();
    },
  };
}

function pgboss() {
  const PgBoss = require("pg-boss");
  return {
    async open(poolSize) {
      const boss = new PgBoss({ connectionString: conninfo, max: poolSize, schedule: false,
                                supervise: false });
      boss.on("error", () => {});
      await boss.start();
      await boss.createQueue(QUEUE);
      return {
        add: () => boss.send(QUEUE, {}),
        addMany: (n, data = {}) => boss.insert(Array.from({ length: n }, () => ({ name: QUEUE, data }))),
        addTimed: () => boss.send(QUEUE, { t0: now() }),
        close: () => boss.stop({ graceful: false, wait: false }),
      };
    },
    async pending(client) {
      return Number((await client.query(
        "SELECT count(*) FROM pgboss.job WHERE name = $1 AND state < 'completed'", [QUEUE]))
        .rows[0].count);
    },
    async clear(client) {
      await client.query("DELETE FROM pgboss.job WHERE name = $1", [QUEUE]).catch(() => {});
    },
    async work(variant, onJob) {
      const boss = new PgBoss({ connectionString: conninfo, max: 10, schedule: false,
                                supervise: false });
      boss.on("error", () => {});
      await boss.start();
      await boss.createQueue(QUEUE);
      // Eight pollers (concurrency 8), each taking one job at a time, or 100 per fetch.
      const batchSize = variant === "fast" ? 100 : 1;
      for (let i = 0; i < 8; i++) {
        await boss.work(QUEUE, { batchSize, pollingIntervalSeconds: 0.5 },
                        async (jobs) => { for (const job of jobs) onJob(job.data); });
      }
      return () => boss.stop({ graceful: false, wait: false });
    },
  };
}

const peer = { graphile, pgboss }[system]?.();
if (!peer) {
  console.error("peers.cjs: SYSTEM must be graphile or pgboss");
  process.exit(2);
}

async function sql() {
  const { Client } = require("pg");
  const client = new Client({ connectionString: conninfo });
  await client.connect();
  return client;
}

async function timed(clients, seconds, call) {
  const end = now() + seconds * 1000;
  let done = 0;
  await Promise.all(Array.from({ length: clients }, async () => {
    while (now() < end) {
      const n = await call();  // not `done += await call()`: that reads `done` before the wait
      done += n;
    }
  }));
  return done / seconds;
}

// A child process that works jobs: `node peers.cjs worker SYSTEM CONNINFO VARIANT`; says
// "ready", waits for "go" on stdin, works, prints "ran N" when told "stop".
async function worker(variant) {
  let ran = 0;
  const lines = readline.createInterface({ input: process.stdin });
  console.log("ready");
  let stop = null;
  for await (const line of lines) {
    if (line === "go") {
      stop = await peer.work(variant, (payload) => {
        ran++;
        if (payload && payload.t0) console.log(`started ${now() - payload.t0}`);
      });
      console.log("working");
    } else if (line === "stop") {
      await stop();
      console.log(`ran ${ran}`);
      process.exit(0);
    }
  }
}

function child(variant) {
  const p = spawn(process.execPath, [__filename, "worker", system, conninfo, variant],
                  { stdio: ["pipe", "pipe", "inherit"] });
  const lines = readline.createInterface({ input: p.stdout });
  const waiting = [];
  lines.on("line", (line) => {
    const w = waiting.findIndex(([prefix]) => line.startsWith(prefix));
    if (w >= 0) waiting.splice(w, 1)[0][1](line);
  });
  return {
    expect: (prefix) => new Promise((resolve) => waiting.push([prefix, resolve])),
    send: (line) => p.stdin.write(line + "\n"),
    exited: new Promise((resolve) => p.on("exit", resolve)),
  };
}

async function main() {
  if (command === "worker") return worker(rest[0]);
  const client = await sql();
  if (command === "enqueue" || command === "batch") {
    const [n, seconds] = rest.map(Number);
    const clients = command === "enqueue" ? n : 1;
    const q = await peer.open(clients + 1);
    await peer.clear(client);
    const rate = await timed(clients, seconds, command === "enqueue"
      ? async () => { await q.add(); return 1; }
      : async () => { await q.addMany(n); return n; });
    await q.close();
    await peer.clear(client);
    console.log(`jobs_per_second: ${rate.toFixed(0)}`);
  } else if (command === "work") {
    const [jobs, processes] = rest.slice(0, 2).map(Number);
    const variant = rest[2];
    const keys = Number(rest[3] || 0);  // graphile-worker only: named queues, one per client
    const q = await peer.open(4);
    await peer.clear(client);
    for (let stored = 0; stored < jobs; stored += 1000) {
      await q.addMany(Math.min(1000, jobs - stored), {}, keys, stored);
    }
    await q.close();
    const workers = Array.from({ length: processes }, () => child(variant));
    await Promise.all(workers.map((w) => w.expect("ready")));
    const t0 = now();
    const working = workers.map((w) => w.expect("working"));
    for (const w of workers) w.send("go");
    await Promise.all(working);
    while (await peer.pending(client) > 0) await new Promise((r) => setTimeout(r, 10));
    const seconds = (now() - t0) / 1000;
    const ran = workers.map((w) => w.expect("ran"));
    for (const w of workers) w.send("stop");
    const runs = (await Promise.all(ran)).reduce((sum, line) => sum + Number(line.split(" ")[1]), 0);
    await Promise.all(workers.map((w) => w.exited));
    const left = await peer.pending(client);
    await peer.clear(client);
    console.log(`jobs_per_second: ${(jobs / seconds).toFixed(0)} runs: ${runs} of ${jobs} left: ${left}`);
  } else if (command === "latency") {
    const [count] = rest.map(Number);
    const q = await peer.open(2);
    await peer.clear(client);
    const w = child("plain");
    await w.expect("ready");
    const working = w.expect("working");
    w.send("go");
    await working;
    await new Promise((r) => setTimeout(r, 1000));  // idle
    const timed = async () => {
      const started = w.expect("started");
      await q.addTimed();
      return Number((await started).split(" ")[1]);
    };
    // The first jobs are timed apart, as fleet_bench's BM_EnqueueToStart does (cold_max_ms).
    let cold = 0;
    for (let i = 0; i < 3; i++) cold = Math.max(cold, await timed());
    const ms = [];
    for (let i = 0; i < count; i++) ms.push(await timed());
    const ran = w.expect("ran");
    w.send("stop");
    await ran;
    await q.close();
    await peer.clear(client);
    ms.sort((a, b) => a - b);
    const at = (p) => ms[Math.min(ms.length - 1, Math.floor(p * ms.length))];
    console.log(`p50_ms: ${at(0.5).toFixed(1)} p99_ms: ${at(0.99).toFixed(1)} ` +
                `cold_max_ms: ${cold.toFixed(1)}`);
  } else {
    console.error(`peers.cjs: unknown command '${command}'`);
    process.exit(2);
  }
  await client.end();
}

main().catch((e) => { console.error(e); process.exit(1); });
