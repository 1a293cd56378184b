/**
 * Rewriting one value of overbrainer.toml in place, for the "Pick GPU Types"
 * command: only the characters of that value change, so the user's comments,
 * order and layout stay as they wrote them.
 */
import { HintedError } from '../errors';
import { parse as parseToml } from 'smol-toml';
import { TomlPositions } from './tomlPositions';
import { TARGET_NAME } from './types';

export type ConfigEditErrorKind =
  /** A picked value that cannot be written (not a name, not an ID, none picked). */
  | 'bad_value'
  /** overbrainer.toml does not parse. */
  | 'invalid_toml'
  /** The target to edit is not in overbrainer.toml. */
  | 'no_target'
  /** The value is written in a way this edit cannot change in place. */
  | 'unsafe_edit';

export class ConfigEditError extends HintedError<ConfigEditErrorKind> {
  declare readonly hint: string;

  constructor(
    kind: ConfigEditErrorKind,
    message: string,
    /** What the user should do. */
    hint: string,
  ) {
    super(kind, message, hint);
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
      'bad_value',
      `"${targetName}" is not a target name`,
      'Pick a target from overbrainer.toml.',
    );
  }
  if (gpuTypes !== 'auto') {
    if (gpuTypes.length === 0) {
      throw new ConfigEditError(
        'bad_value',
        'no GPU type was picked',
        'Pick at least one GPU type, or "auto".',
      );
    }
    for (const id of gpuTypes) {
      if (!/^[\x20-\x7e]{1,100}$/.test(id) || id === 'auto') {
        throw new ConfigEditError(
          'bad_value',
          `"${id.slice(0, 40)}" is not a GPU type ID`,
          'Pick GPU types from the Runpod catalog.',
        );
      }
    }
  }
  const literal = gpuTypes === 'auto' ? '"auto"' : `[${gpuTypes.map(tomlString).join(', ')}]`;
  return setTargetValue(
    tomlText,
    targetName,
    'gpu_types',
    gpuTypes === 'auto' ? 'auto' : [...gpuTypes],
    literal,
    'pick the GPU types again',
  );
}

/**
 * `tomlText` with `targets.<targetName>.data_center_ids` set to `ids` ("auto": any data center),
 * in place as {@link setGpuTypes} does.
 */
export function setDataCenterIds(
  tomlText: string,
  targetName: string,
  ids: readonly string[] | 'auto',
): string {
  checkTargetName(targetName);
  if (ids !== 'auto') {
    if (ids.length === 0) {
      throw new ConfigEditError(
        'bad_value',
        'no data center was picked',
        'Pick at least one, or "auto".',
      );
    }
    for (const id of ids) checkId(id, 'a data center ID', 'Pick data centers from Runpod.');
  }
  const literal = ids === 'auto' ? '"auto"' : `[${ids.map(tomlString).join(', ')}]`;
  return setTargetValue(
    tomlText,
    targetName,
    'data_center_ids',
    ids === 'auto' ? 'auto' : [...ids],
    literal,
    'pick the data centers again',
  );
}

/** `tomlText` with `targets.<targetName>.network_volume_id` set to `id`, in place. */
export function setNetworkVolumeId(tomlText: string, targetName: string, id: string): string {
  checkTargetName(targetName);
  checkId(id, 'a network volume ID', 'Pick a network volume of the account.');
  return setTargetValue(
    tomlText,
    targetName,
    'network_volume_id',
    id,
    tomlString(id),
    'pick the volume again',
  );
}

function checkTargetName(targetName: string): void {
  if (!TARGET_NAME.test(targetName)) {
    throw new ConfigEditError(
      'bad_value',
      `"${targetName}" is not a target name`,
      'Pick a target from overbrainer.toml.',
    );
  }
}

function checkId(id: string, what: string, hint: string): void {
  if (!/^[\x20-\x7e]{1,100}$/.test(id) || id === 'auto') {
    throw new ConfigEditError('bad_value', `"${id.slice(0, 40)}" is not ${what}`, hint);
  }
}

/**
 * Sets `targets.<targetName>.<key>` to `value` (written as `literal`): the old value replaced
 * where it is, or the key added at the end of the target's table; the result is parsed back and
 * must differ from the input in that value only.
 */
function setTargetValue(
  tomlText: string,
  targetName: string,
  key: string,
  value: unknown,
  literal: string,
  again: string,
): string {
  let before: Record<string, unknown>;
  try {
    before = parseToml(tomlText) as Record<string, unknown>;
  } catch {
    throw new ConfigEditError(
      'invalid_toml',
      'overbrainer.toml is not valid TOML, so it cannot be edited safely',
      `Fix the error the Problems view shows, then ${again}.`,
    );
  }
  const positions = new TomlPositions(tomlText);
  const keyPath = ['targets', targetName, key];
  const existing = positions.key(keyPath);
  const eol = tomlText.includes('\r\n') ? '\r\n' : '\n';
  let edited: string;
  if (existing) {
    edited = tomlText.slice(0, existing.value.offset) + literal + tomlText.slice(existing.valueEnd);
  } else {
    const table = positions.table(['targets', targetName]);
    if (!table) {
      throw new ConfigEditError(
        'no_target',
        `overbrainer.toml has no [targets.${targetName}]`,
        `Add a [targets.${targetName}] table with kind = "runpod" first.`,
      );
    }
    if (table.kind === 'inline' && table.inlineClose !== undefined) {
      const close = table.inlineClose;
      let end = close;
      while (end > 0 && (tomlText[end - 1] === ' ' || tomlText[end - 1] === '\t')) end--;
      const insert = table.entries > 0 ? `, ${key} = ${literal} ` : ` ${key} = ${literal} `;
      edited = tomlText.slice(0, end) + insert + tomlText.slice(close);
    } else {
      // Under a [targets.NAME] header the key is bare; for dotted keys it keeps their prefix.
      const prefix =
        table.kind === 'dotted'
          ? [...table.path.slice(table.headerPath.length), key].map(bareOrQuoted).join('.')
          : key;
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
      'unsafe_edit',
      'overbrainer.toml could not be edited safely here',
      `Set ${key} = ${literal} in [targets.${targetName}] by hand.`,
    );
  }
  const target = (after.targets as Record<string, Record<string, unknown>> | undefined)?.[
    targetName
  ];
  const beforeTarget = (before.targets as Record<string, Record<string, unknown>> | undefined)?.[
    targetName
  ];
  const same =
    target !== undefined &&
    JSON.stringify(target[key]) === JSON.stringify(value) &&
    JSON.stringify({ ...target, [key]: null }) ===
      JSON.stringify({ ...beforeTarget, [key]: null }) &&
    JSON.stringify({ ...(after.targets as object), [targetName]: null }) ===
      JSON.stringify({ ...(before.targets as object), [targetName]: null }) &&
    JSON.stringify({ ...after, targets: null }) === JSON.stringify({ ...before, targets: null });
  if (!same) {
    throw new ConfigEditError(
      'unsafe_edit',
      'overbrainer.toml could not be edited safely here',
      `Set ${key} = ${literal} in [targets.${targetName}] by hand.`,
    );
  }
  return edited;
}
