/**
 * `overbrainer`: the thin CLI on the same core as the extension (bundled by
 * esbuild.mjs to dist/cli.js; `npx tsx src/cli.ts` runs it from source). The
 * commands live in ./cli/main.ts; this file binds them to the process: argv,
 * stdout/stderr, the environment, SIGINT, and the exit code.
 *
 * Test hook (not in the usage): OVERBRAINER_TIMING_SCALE=<factor ≥ 1> scales
 * every production duration down (see ./cli/main.ts `timingFrom`).
 */
import { colorAllowed, liveAllowed, LiveArea } from './cli/liveArea';
import { runCli } from './cli/main';
import { describeError } from './core/errors';

function writer(stream: NodeJS.WriteStream): (line: string) => void {
  return (line) => {
    stream.write(`${line}\n`);
  };
}

/**
 * A closed stdout or stderr (`overbrainer pod ls | head`) must not crash a command that may be
 * deleting a pod: later lines are dropped, the command runs to its end.
 */
function tolerateClosedPipes(): void {
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EPIPE') throw error;
    });
  }
}

async function main(): Promise<void> {
  tolerateClosedPipes();
  // On a terminal, stderr keeps a block of status lines redrawn in place below its lines.
  const area = liveAllowed(process.env, process.stderr.isTTY)
    ? new LiveArea((chunk) => process.stderr.write(chunk), {
        color: colorAllowed(process.env, true),
        // A pseudo-terminal without a size reports 0 columns.
        columns: () => process.stderr.columns || 80,
      })
    : null;
  const code = await runCli(process.argv.slice(2), {
    stdout:
      area !== null && process.stdout.isTTY
        ? (line) => area.line(line, (chunk) => process.stdout.write(chunk))
        : writer(process.stdout),
    stderr: area === null ? writer(process.stderr) : (line) => area.line(line),
    status: area === null ? undefined : (lines) => area.set(lines),
    env: process.env,
    cwd: process.cwd(),
    terminal: { stdin: process.stdin, stdout: process.stdout },
    onInterrupt: (handler) => {
      // Replaces Node's default exit on SIGINT for as long as the command may need to clean up.
      process.on('SIGINT', handler);
      return () => process.off('SIGINT', handler);
    },
  });
  area?.set([]);
  process.exitCode = code;
  // Everything the command opened is closed by now; should a stray handle remain, it must
  // not keep a finished command alive (the timer itself does not hold the process).
  setTimeout(() => process.exit(code), 2_000).unref();
}

main().catch((error: unknown) => {
  process.stderr.write(`overbrainer: internal error: ${describeError(error)}\n`);
  process.exitCode = 1;
});
