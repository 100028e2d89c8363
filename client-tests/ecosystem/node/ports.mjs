// Helpers the matrix's test files share (run.sh copies them beside the tests).
import { createServer } from "node:net";

/// A port the kernel just handed out on 127.0.0.1 (free when it returns).
export const freePort = () =>
  new Promise((ok, fail) => {
    const s = createServer();
    s.once("error", fail);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });

export const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));
