#!/usr/bin/env node
// `npx coordis-server ...`: runs the platform package's binary with these
// arguments, passing its exit status (or signal) on.
"use strict";
const { spawnSync } = require("node:child_process");
const { binaryPath } = require("../index.js");

const result = spawnSync(binaryPath(), process.argv.slice(2), { stdio: "inherit" });
if (result.error) {
  console.error(result.error.message);
  process.exit(1);
}
if (result.signal) {
  process.kill(process.pid, result.signal);
}
process.exit(result.status ?? 1);
