/**
 * Relative links of Markdown files, and the anchors GitHub gives their headings, for the link
 * test (test/unit/doc-links.test.ts). Links with a scheme (https:, mailto:) are not followed;
 * code (fenced blocks and inline spans) holds no links.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/** A link that does not point where it says: the file and line it is on, the target, and why. */
export interface BrokenLink {
  file: string;
  line: number;
  target: string;
  problem: string;
}

/** Every `.md` file under `dir` (absolute paths, sorted), node_modules and dot folders left out. */
export function markdownFiles(dir: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name.startsWith('.') || entry.name === 'node_modules') continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...markdownFiles(path));
    else if (entry.name.endsWith('.md')) found.push(path);
  }
  return found.sort();
}

/** The text with fenced code blocks blanked (line count kept), so neither links nor headings are read in them. */
function withoutFences(text: string): string[] {
  let fence: string | undefined;
  return text.split('\n').map((line) => {
    const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence === undefined && marker !== undefined) {
      fence = marker;
      return '';
    }
    if (fence !== undefined) {
      if (marker !== undefined && marker.startsWith(fence)) fence = undefined;
      return '';
    }
    return line;
  });
}

/**
 * GitHub's anchor for a heading's text (github-slugger): inline markup reduced to its text, lower
 * case, every character but letters, digits, `_`, `-` and spaces dropped, spaces made `-`.
 */
export function githubSlug(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a Markdown text's headings, in order, repeated slugs numbered `-1`, `-2` as GitHub does. */
export function headingAnchors(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of withoutFences(text)) {
    const heading = /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const slug = githubSlug(heading);
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

/** The relative link targets of a Markdown text, with their line numbers (inline links, images and reference definitions). */
export function relativeLinks(text: string): { line: number; target: string }[] {
  const links: { line: number; target: string }[] = [];
  withoutFences(text).forEach((raw, i) => {
    const line = raw.replace(/(`+)[^`]*?\1/g, '');
    const targets = [
      ...[...line.matchAll(/\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!),
      ...[...line.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/g)].map((m) => m[1]!),
    ];
    for (const target of targets) if (target !== '' && !/^[a-z][a-z0-9+.-]*:/i.test(target)) links.push({ line: i + 1, target });
  });
  return links;
}

/**
 * The links of `file` (absolute) that point to no file, or to an anchor its Markdown target has no
 * heading for. `root` only shortens the paths reported.
 */
export function brokenLinks(file: string, root: string, read: (path: string) => string = (p) => readFileSync(p, 'utf8')): BrokenLink[] {
  const broken: BrokenLink[] = [];
  for (const { line, target } of relativeLinks(read(file))) {
    const [path, anchor] = [target.split('#')[0]!, target.includes('#') ? target.slice(target.indexOf('#') + 1) : undefined];
    const resolved = path === '' ? file : resolve(dirname(file), decodeURIComponent(path));
    const report = (problem: string) => broken.push({ file: relative(root, file), line, target, problem });
    if (!existsSync(resolved)) {
      report(`no such file: ${relative(root, resolved)}`);
      continue;
    }
    if (anchor === undefined || !resolved.endsWith('.md') || statSync(resolved).isDirectory()) continue;
    if (!headingAnchors(read(resolved)).has(anchor)) report(`no heading with anchor #${anchor} in ${relative(root, resolved)}`);
  }
  return broken;
}
