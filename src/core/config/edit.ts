/**
 * Rewriting one value of overbrainer.toml in place, for the "Pick GPU Types"
 * command: only the characters of that value change, so the user's comments,
 * order and layout stay as they wrote them.
 */
import { HintedError } from '../errors';
import { parse as parseToml } from 'smol-toml';
import { TomlPositions } from './tomlPositions';
import { TARGET_NAME } from './types';

export class ConfigEditError extends HintedError {
  declare readonly hint: string;

  constructor(
    message: string,
    /** What the user should do. */
    hint: string,
  ) {
    super(message, hint);
    this.name = 'ConfigEditError';
  }
}

/** A TOML basic string: JSON's escapes are all valid TOML escapes. */
function tomlString(value: string): string {
  return JSON.stringify(value);
}

function bareOrQuoted(segment: string): string {
  return /^[A-Za-z0-9_-]+$/.test(segment) ? segment : tomlString(segment);
}

/**
 * `tomlText` with `targets.<targetName>.gpu_types` set to `gpuTypes`: the old
 * value replaced where it is, or the key added at the end of the target's
 * table. Throws {@link ConfigEditError} when the text is not valid TOML, the
 * target does not exist, or the list is empty.
 */
export function setGpuTypes(
  tomlText: string,
  targetName: string,
  gpuTypes: readonly string[] | 'auto',
): string {
  if (!TARGET_NAME.test(targetName)) {
    throw new ConfigEditError(
      `"${targetName}" is not a target name`,
      'Pick a target from overbrainer.toml.',
    );
  }
  if (gpuTypes !== 'auto') {
    if (gpuTypes.length === 0) {
      throw new ConfigEditError('no GPU type was picked', 'Pick at least one GPU type, or "auto".');
    }
    for (const id of gpuTypes) {
      if (!/^[\x20-\x7e]{1,100}$/.test(id) || id === 'auto') {
        throw new ConfigEditError(
          `"${id.slice(0, 40)}" is not a GPU type ID`,
          'Pick GPU types from the Runpod catalog.',
        );
      }
    }
  }
  let before: Record<string, unknown>;
  try {
    before = parseToml(tomlText) as Record<string, unknown>;
  } catch {
    throw new ConfigEditError(
      'overbrainer.toml is not valid TOML, so it cannot be edited safely',
      'Fix the error the Problems view shows, then pick the GPU types again.',
    );
  }
  const literal = gpuTypes === 'auto' ? '"auto"' : `[${gpuTypes.map(tomlString).join(', ')}]`;
  const positions = new TomlPositions(tomlText);
  const keyPath = ['targets', targetName, 'gpu_types'];
  const existing = positions.key(keyPath);
  const eol = tomlText.includes('\r\n') ? '\r\n' : '\n';
  let edited: string;
  if (existing) {
    edited = tomlText.slice(0, existing.value.offset) + literal + tomlText.slice(existing.valueEnd);
  } else {
    const table = positions.table(['targets', targetName]);
    if (!table) {
      throw new ConfigEditError(
        `overbrainer.toml has no [targets.${targetName}]`,
        `Add a [targets.${targetName}] table with kind = "runpod" first.`,
      );
    }
    if (table.kind === 'inline' && table.inlineClose !== undefined) {
      const close = table.inlineClose;
      let end = close;
      while (end > 0 && (tomlText[end - 1] === ' ' || tomlText[end - 1] === '\t')) end--;
      const insert = table.entries > 0 ? `, gpu_types = ${literal} ` : ` gpu_types = ${literal} `;
      edited = tomlText.slice(0, end) + insert + tomlText.slice(close);
    } else {
      // Under a [targets.NAME] header the key is bare; for dotted keys it keeps their prefix.
      const prefix =
        table.kind === 'dotted'
          ? [...table.path.slice(table.headerPath.length), 'gpu_types'].map(bareOrQuoted).join('.')
          : 'gpu_types';
      const at = table.lastLineEnd;
      edited = `${tomlText.slice(0, at)}${eol}${prefix} = ${literal}${tomlText.slice(at)}`;
    }
  }
  // The edit must give exactly the document it meant to: the same, with the new value.
  let after: Record<string, unknown>;
  try {
    after = parseToml(edited) as Record<string, unknown>;
  } catch {
    throw new ConfigEditError(
      'overbrainer.toml could not be edited safely here',
      `Set gpu_types = ${literal} in [targets.${targetName}] by hand.`,
    );
  }
  const target = (after.targets as Record<string, Record<string, unknown>> | undefined)?.[
    targetName
  ];
  const expected = gpuTypes === 'auto' ? 'auto' : [...gpuTypes];
  const beforeTarget = (before.targets as Record<string, Record<string, unknown>> | undefined)?.[
    targetName
  ];
  const same =
    target !== undefined &&
    JSON.stringify(target.gpu_types) === JSON.stringify(expected) &&
    JSON.stringify({ ...target, gpu_types: null }) ===
      JSON.stringify({ ...beforeTarget, gpu_types: null }) &&
    JSON.stringify({ ...(after.targets as object), [targetName]: null }) ===
      JSON.stringify({ ...(before.targets as object), [targetName]: null }) &&
    JSON.stringify({ ...after, targets: null }) === JSON.stringify({ ...before, targets: null });
  if (!same) {
    throw new ConfigEditError(
      'overbrainer.toml could not be edited safely here',
      `Set gpu_types = ${literal} in [targets.${targetName}] by hand.`,
    );
  }
  return edited;
}
