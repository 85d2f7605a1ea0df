// BullMQ side of the peers bench (Node, JS jobs, Redis). The job appends
// "i unix_time" to a file, as peer_jobs.done does for every other system.
//
//   node peer_bullmq.cjs worker REDIS_URL CONCURRENCY
//   node peer_bullmq.cjs submit REDIS_URL PATH FIRST N
//       adds jobs FIRST..FIRST+N-1 (addBulk, 500 at a time) and prints
//       "i submit_time" for each, then "sent"
//
// `bullmq` and `ioredis` come from NODE_PATH (scripts/setup-bench-peers.sh
// installs them with npm). Jobs are removed from Redis once done, with
// default settings otherwise.
"use strict";
const fs = require("node:fs");
const { Queue, Worker } = require("bullmq");
const IORedis = require("ioredis");

const QUEUE = "peers";
const [mode, url] = process.argv.slice(2, 4);

function connection() {
  return new IORedis(url, { maxRetriesPerRequest: null });
}

const fds = new Map();
function done(path, i) {
  let fd = fds.get(path);
  if (fd === undefined) {
    fd = fs.openSync(path, "a");
    fds.set(path, fd);
  }
  fs.writeSync(fd, `${i} ${(Date.now() / 1000).toFixed(6)}\n`);
  return i;
}

async function worker(concurrency) {
  const w = new Worker(QUEUE, async (job) => done(job.data.path, job.data.i), {
    connection: connection(),
    concurrency,
  });
  const stop = async () => {
    await w.close();
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

async function submit(path, first, n) {
  const q = new Queue(QUEUE, { connection: connection() });
  const out = [];
  for (let start = first; start < first + n; start += 500) {
    const end = Math.min(first + n, start + 500);
    const jobs = [];
    for (let i = start; i < end; i++) {
      jobs.push({
        name: "done",
        data: { path, i },
        opts: { removeOnComplete: true, removeOnFail: true },
      });
    }
    const t = (Date.now() / 1000).toFixed(6);
    await q.addBulk(jobs);
    for (let i = start; i < end; i++) out.push(`${i} ${t}`);
  }
  out.push("sent");
  await q.close();
  // A write to a pipe is asynchronous: exit once it is flushed.
  process.stdout.write(out.join("\n") + "\n", () => process.exit(0));
}

if (mode === "worker") {
  worker(parseInt(process.argv[4], 10));
} else if (mode === "submit") {
  const [path, first, n] = process.argv.slice(4, 7);
  submit(path, parseInt(first, 10), parseInt(n, 10)).catch((e) => {
    console.error(e);
    process.exit(1);
  });
} else {
  console.error("usage: peer_bullmq.cjs worker URL CONCURRENCY | submit URL PATH FIRST N");
  process.exit(2);
}
