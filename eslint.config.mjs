import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** The core's layers, highest first: each may import only the ones after it. */
const LAYERS = ['flow', 'sweep', 'follow', 'pod', 'runpod', 'train', 'runs', 'exec', 'config'];

/** One `no-restricted-imports` config per layer (flat configs do not merge one rule's options). */
function coreLayers() {
  const editor = { name: 'vscode', message: 'src/core must not depend on the editor API.' };
  const frontEnds = {
    group: ['**/ui', '**/ui/*', '**/cli', '**/cli/*', '**/extension'],
    message: 'src/core must not import the front ends (ui, cli): they import the core.',
  };
  const above = (layers, prefix, here) =>
    layers.length === 0
      ? []
      : [
          {
            group: layers.flatMap((l) => [`${prefix}${l}`, `${prefix}${l}/*`]),
            message: `${here} is below ${layers.join(', ')}: layers import downward only (docs/ARCHITECTURE.md).`,
          },
        ];
  const rule = (patterns) => ({
    'no-restricted-imports': ['error', { paths: [editor], patterns: [frontEnds, ...patterns] }],
  });
  return [
    // The base files (events, clock, timing, disposable) import no layer.
    { files: ['src/core/*.ts'], rules: rule(above(LAYERS, './', 'the base')) },
    ...LAYERS.map((layer, i) => ({
      files: [`src/core/${layer}/**/*.ts`],
      rules: rule(above(LAYERS.slice(0, i), '../', `core/${layer}`)),
    })),
  ];
}

/**
 * The front ends (src/ui, src/cli) reach the core through flow/ only: any file of core/flow and
 * the base files (src/core/*.ts: types, events, errors, clock, timing…), never a lower layer.
 */
function frontEnds() {
  const lower = LAYERS.filter((l) => l !== 'flow');
  return [
    {
      files: ['src/ui/**/*.ts', 'src/cli/**/*.ts'],
      rules: {
        'no-restricted-imports': [
          'error',
          {
            patterns: [
              {
                group: lower.flatMap((l) => [`**/core/${l}`, `**/core/${l}/**`]),
                message:
                  'the front ends import core/flow and the base files (src/core/*.ts) only: call a flow function, or re-export the type through flow/ (docs/ARCHITECTURE.md).',
              },
            ],
          },
        ],
      },
    },
  ];
}

export default tseslint.config(
  {
    ignores: [
      'node_modules/**',
      'dist/**',
      'out/**',
      'test/e2e/vscode/**',
      'test-results/**',
      '.state/**',
      // bench/child.ts bundles the measured side here (generated).
      '.bench-tmp/**',
      '.dist-stage-*/**',
      '.cache/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts', '**/*.mjs'],
    languageOptions: { globals: { console: 'readonly', process: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      eqeqeq: ['error', 'always'],
    },
  },
  // The core is editor-independent (the CLI and the tests run it without VS Code), and its layers
  // import downward only: flow > sweep > follow > pod > runpod > train > runs > exec > config >
  // the base files
  // (events, clock, timing, disposable). docs/ARCHITECTURE.md says what each layer holds.
  ...coreLayers(),
  ...frontEnds(),
  {
    // The webview page runs in a browser sandbox and cannot reach the editor API.
    files: ['media/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { paths: [{ name: 'vscode', message: 'the webview cannot import vscode.' }] },
      ],
    },
  },
);
