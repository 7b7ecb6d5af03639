// Starting bloomeryd for the node suites: $BLOOMERYD (default:
// build/bloomeryd) on a free port, ready once its log says it listens.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const BLOOMERYD = process.env.BLOOMERYD || path.join(here, '..', '..', 'build', 'bloomeryd');

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
}

// Resolves once the server says it listens (its own log: a connection
// could reach another program on the port), rejects with its output if it
// exits first.
function ready(proc) {
  return new Promise((resolve, reject) => {
    let out = '';
    const seen = (chunk) => {
      out += chunk;
      if (out.includes('Ready to accept connections')) {
        proc.stdout.off('data', seen);
        proc.stdout.resume();
        resolve();
      }
    };
    proc.stdout.on('data', seen);
    proc.once('exit', (code) => reject(Object.assign(
      new Error(`bloomeryd exited with ${code}:\n${out}`), { output: out })));
  });
}

// bloomeryd with the arguments argsFor(port) gives for a free port;
// resolves to { server, port }.
export async function startServer(argsFor) {
  // A port another program took before the bind: again on another.
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    const server = spawn(BLOOMERYD, argsFor(port), { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      await ready(server);
      return { server, port };
    } catch (e) {
      if (attempt === 4 || !e.output.includes('Address already in use')) throw e;
    }
  }
}

// SIGTERM; resolves to the exit status.
export function stopServer(server) {
  const exited = new Promise((resolve) => server.once('exit', resolve));
  server.kill('SIGTERM');
  return exited;
}
