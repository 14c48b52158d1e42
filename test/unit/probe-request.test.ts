/** /probe's query: one configured source, nothing else; every refusal one line naming the problem. */
import { describe, expect, it } from 'vitest';
import { parseProbeRequest } from '../../src/serve/routes.js';

const SOURCES = ['production', 'sandbox'];
const parse = (query: string) => parseProbeRequest(new URLSearchParams(query), SOURCES);

describe('parseProbeRequest', () => {
  it('accepts a configured source', () => {
    expect(parse('source=sandbox')).toEqual({ source: 'sandbox' });
  });

  it.each([
    ['', 'missing parameter source: /probe?source=NAME, where the configured sources are production, sandbox'],
    ['source=nope', 'unknown source nope: the configured sources are production, sandbox'],
    ['source=', 'source is not a source name ([a-z0-9_-]+): the configured sources are production, sandbox'],
    ['source=production&source=sandbox', 'parameter source given 2 times: /probe reads one source'],
    ['source=production&target=http://example.com', 'unknown parameter target: /probe takes only source=NAME'],
    ['target=production', 'unknown parameter target: /probe takes only source=NAME'],
  ])('refuses %j', (query, error) => {
    expect(parse(query)).toEqual({ error });
  });

  it('never echoes input that is not a plain name, so a refusal stays one harmless line', () => {
    for (const query of ['source=a%0Ab', 'source=%3Cscript%3E', `source=${'a'.repeat(65)}`, 'x%0Ay=1']) {
      const result = parseProbeRequest(new URLSearchParams(query), SOURCES);
      expect('error' in result && result.error).toMatch(/^[^\n<]+$/);
      expect('error' in result && result.error).not.toContain('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa');
    }
  });
});
