/**
 * Every relative link of README.md, CONTRIBUTING.md and docs/ points to a file that exists, and
 * every `#anchor` to a heading of its target (GitHub's anchors), so moving a section or a file
 * cannot leave a link behind.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { brokenLinks, githubSlug, headingAnchors, markdownFiles, relativeLinks } from '../helpers/doc-links.js';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const DOCS = [join(ROOT, 'README.md'), join(ROOT, 'CONTRIBUTING.md'), ...markdownFiles(join(ROOT, 'docs'))];

describe('links in the documentation', () => {
  it('reads README.md, CONTRIBUTING.md and docs/', () => {
    expect(DOCS.map((f) => f.slice(ROOT.length + 1))).toEqual(expect.arrayContaining(['README.md', 'CONTRIBUTING.md', 'docs/configuration.md', 'docs/etl.md']));
  });

  it.each(DOCS.map((f) => [f.slice(ROOT.length + 1), f]))('%s: every relative link and anchor resolves', (_, file) => {
    expect(brokenLinks(file, ROOT)).toEqual([]);
  });
});

describe('the link checker', () => {
  it('slugs headings as GitHub does', () => {
    expect(githubSlug('State: `state show`, `set-watermark`, `reset`')).toBe('state-state-show-set-watermark-reset');
    expect(githubSlug('TLS and basic auth (`WEB_CONFIG_FILE`)')).toBe('tls-and-basic-auth-web_config_file');
    expect(githubSlug('The /metrics and /probe endpoints')).toBe('the-metrics-and-probe-endpoints');
    expect(githubSlug('E0 `POST /connect/token`')).toBe('e0-post-connecttoken');
    expect([...headingAnchors('# A\n\n## A\n\n```\n# not a heading\n```\n## A\n')]).toEqual(['a', 'a-1', 'a-2']);
  });

  it('finds links outside code only, and not those with a scheme', () => {
    const text = '[a](x.md) `[b](y.md)` [c](https://example.com) [d](#here)\n```\n[e](z.md)\n```\n[f]: other.md\n';
    expect(relativeLinks(text)).toEqual([
      { line: 1, target: 'x.md' },
      { line: 1, target: '#here' },
      { line: 5, target: 'other.md' },
    ]);
  });

  it('fails on a missing file and on an anchor its target lacks', () => {
    const dir = mkdtempSync(join(tmpdir(), 'doc-links-'));
    writeFileSync(join(dir, 'target.md'), '# Title\n\n## A section\n');
    writeFileSync(
      join(dir, 'page.md'),
      '# Page\n\n[ok](target.md#a-section) [here](#page)\n[gone](missing.md) [moved](target.md#another-section) [self](#nowhere)\n',
    );
    expect(brokenLinks(join(dir, 'page.md'), dir).map((b) => `${b.line} ${b.target}: ${b.problem}`)).toEqual([
      '4 missing.md: no such file: missing.md',
      '4 target.md#another-section: no heading with anchor #another-section in target.md',
      '4 #nowhere: no heading with anchor #nowhere in page.md',
    ]);
  });
});
