// ESLint for the whole tree: typescript-eslint's type-checked rules (floating promises, unsafe any)
// on every TypeScript file of the four projects, and Prettier owns layout (eslint-config-prettier).
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'packages/*/dist/', 'node_modules/', 'data/', 'coverage/', 'grafana/dashboards/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['*.js', '.dependency-cruiser.js', 'scripts/*.mjs', 'bench/lib/*.mjs'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      // `_name` marks a parameter or binding kept for its position or to leave it out of a rest object.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' }],
      // An async implementation of a promise-returning interface (a probe, a fake client) needs no await.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    // A function a newcomer reads at once: its body fits on a screen, its call names what it passes.
    // No exception: one that is needed is listed here, in its own entry, with its reason.
    files: ['src/**/*.ts'],
    rules: {
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }],
      'max-params': ['error', 5],
    },
  },
  {
    files: ['test/**/*.ts', 'packages/*/test/**/*.ts'],
    rules: {
      // vitest's asymmetric matchers (expect.any, expect.stringMatching) are typed `any` by vitest itself.
      '@typescript-eslint/no-unsafe-assignment': 'off',
      // Tests feed NUL and other control characters on purpose and match them.
      'no-control-regex': 'off',
      // Dashboards are read from their JSON files, where the Grafana SDK's enums are plain strings.
      '@typescript-eslint/no-unsafe-enum-comparison': 'off',
    },
  },
  {
    // Plain JavaScript (config, scripts, bench helpers) has no types to check.
    files: ['**/*.js', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', URL: 'readonly' } },
  },
  prettier,
);
