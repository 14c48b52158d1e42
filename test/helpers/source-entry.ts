/**
 * CONFIG_FILE text for unit tests: one source entry of a `sources:` list, on made-up upstream
 * addresses that nothing contacts.
 */

/**
 * A valid source entry named `name` with `secret` as its client secret, as YAML lines indented for
 * a `sources:` list; `extra` lines (e.g. `labels: {team: a}`) are appended to it.
 */
export function sourceEntry(name: string, secret: string, extra: string[] = []): string {
  return [
    `  - name: ${name}`,
    `    statistics_url: https://${name}.example.test/api`,
    `    auth_url: https://auth.${name}.example.test`,
    `    client_id: client-${name}`,
    `    client_secret: ${secret}`,
    ...extra.map((line) => `    ${line}`),
  ].join('\n');
}
