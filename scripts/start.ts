/**
 * The demo: the real VS Code (code-server) with this build of the extension, `examples/tiny/`
 * opened. Prints the URL and runs until Ctrl-C, then stops code-server and everything it started.
 * scripts/start.sh installs what is missing and builds first.
 *
 * Options: --port N (default 8080; 0 picks a free one), --folder PATH (default examples/tiny).
 */
import * as path from 'node:path';
import { CodeServer, REPO_ROOT } from '../test/e2e/harness';

function option(name: string): string | undefined {
  const index = process.argv.indexOf(name);
  return index < 0 ? undefined : process.argv[index + 1];
}

async function main(): Promise<void> {
  const port = Number(option('--port') ?? process.env.OVERBRAINER_DEMO_PORT ?? 8080);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`--port must be a port number (0 picks a free one), not ${String(port)}`);
  }
  const folder = path.resolve(option('--folder') ?? path.join(REPO_ROOT, 'examples', 'tiny'));
  const server = await CodeServer.start({
    workspace: folder,
    port,
    // The demo shows the product as a user sees it first: walkthroughs may open.
    settings: { 'workbench.startupEditor': 'welcomePage' },
  });
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    console.log('\nstopping code-server…');
    server.close().then(
      () => process.exit(0),
      (error: unknown) => {
        console.error(error);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  console.log('');
  console.log(`Overbrainer demo: open ${server.folderUrl}`);
  console.log(
    `(VS Code in the browser, folder ${path.relative(REPO_ROOT, folder) || '.'}; Ctrl-C stops it)`,
  );
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
