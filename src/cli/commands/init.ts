/**
 * `init`: writes the commented overbrainer.toml (the same template as VS Code's "Create
 * overbrainer.toml", from the core), adds `runs/` and `.env` to the workspace's .gitignore
 * (creating it in a git workspace), and says how to set the API key and what to run next. An
 * existing file is never overwritten without --force.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { HintedError } from '../../core/errors';
import {
  CONFIG_FILE,
  configTemplate,
  gitignoreWords,
  protectWithGitignore,
} from '../../core/flow/config';
import { EXIT_OK, type Session } from '../session';

/** `init` found an overbrainer.toml and no --force. */
export class ConfigExists extends HintedError<'config_exists'> {
  declare readonly hint: string;

  constructor(file: string) {
    super(
      'config_exists',
      `${file} exists: init never overwrites it`,
      `edit ${file}, or run \`overbrainer init --force\` to replace it with the template`,
    );
    this.name = 'ConfigExists';
  }
}

export function initCommand(s: Session, force: boolean): number {
  const file = path.join(s.dir, CONFIG_FILE);
  if (!force && fs.existsSync(file)) throw new ConfigExists(file);
  fs.mkdirSync(s.dir, { recursive: true });
  // wx: a file written between the check and here is not overwritten either.
  fs.writeFileSync(file, configTemplate(), { flag: force ? 'w' : 'wx' });
  s.io.stdout(`init: wrote ${file} (every key is explained in its comments)`);
  const ignored = protectWithGitignore(s.dir);
  if (ignored !== null) s.io.stdout(`init: ${gitignoreWords(ignored)}`);
  s.io.stdout(
    'init: set the Runpod API key (Runpod console → Settings → API Keys) in the environment, ' +
      'export OVERBRAINER_RUNPOD__API_KEY=..., or as a line OVERBRAINER_RUNPOD__API_KEY=... in .env beside it ' +
      '(never in overbrainer.toml; the API address is read from the environment only, never from .env)',
  );
  s.io.stdout(
    'init: then `overbrainer train --dry-run` shows the plan and the quote, and `overbrainer train` starts a run',
  );
  return EXIT_OK;
}
