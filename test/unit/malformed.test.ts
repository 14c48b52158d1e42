import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/log.js';
import { MalformedRequestLog, requestTarget } from '../../src/serve/web/malformed.js';
import { captureLog, type CapturedLog } from '../helpers/log-capture.js';

let capture: CapturedLog;
let log: MalformedRequestLog;

beforeEach(() => {
  vi.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') });
  capture = captureLog();
  log = new MalformedRequestLog(createLogger('info', { format: 'json', destination: capture }), 60_000);
});
afterEach(() => {
  log.close();
  vi.useRealTimers();
});

describe('MalformedRequestLog', () => {
  it('logs the first request at once, then at most one line per interval with the count since the last line', () => {
    log.record('target', '10.0.0.1');
    expect(capture.lines()).toEqual([expect.objectContaining({ level: 'warn', count: 1, kinds: { target: 1, http: 0 }, lastRemote: '10.0.0.1' })]);

    for (let i = 0; i < 999; i += 1) log.record(i % 3 === 0 ? 'http' : 'target', '10.0.0.2');
    vi.advanceTimersByTime(59_999);
    expect(capture.lines()).toHaveLength(1);

    vi.advanceTimersByTime(1);
    const lines = capture.lines();
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatchObject({ level: 'warn', count: 999, kinds: { target: 666, http: 333 }, lastRemote: '10.0.0.2', since: '2026-01-01T00:00:00.000Z' });
    expect(lines[1]!.msg).toMatch(/^999 malformed requests since .* answered 400/);
  });

  it('logs nothing while nothing comes, and logs at once again once an interval has passed', () => {
    log.record('target', undefined);
    vi.advanceTimersByTime(10 * 60_000);
    expect(capture.lines()).toHaveLength(1);
    log.record('http', '::1');
    expect(capture.lines()).toHaveLength(2);
    expect(capture.lines()[1]).toMatchObject({ count: 1, kinds: { target: 0, http: 1 } });
  });

  it('tells what is still counted when closed, then nothing more', () => {
    log.record('target', '10.0.0.1');
    vi.advanceTimersByTime(1_000);
    log.record('target', '10.0.0.1');
    log.record('target', '10.0.0.1');
    log.close();
    expect(capture.lines().map((l) => l.count)).toEqual([1, 2]);
    vi.advanceTimersByTime(120_000);
    log.close();
    expect(capture.lines()).toHaveLength(2);
    expect(capture.lines().every((l) => l.level === 'warn')).toBe(true);
  });
});

describe('requestTarget', () => {
  it('parses what the handler reads, and returns undefined for a target that is not a URL', () => {
    expect(requestTarget('/probe?source=a')?.searchParams.get('source')).toBe('a');
    expect(requestTarget(undefined)?.pathname).toBe('/');
    expect(requestTarget('http://localhost/metrics')?.pathname).toBe('/metrics');
    expect(requestTarget('//[')).toBeUndefined();
    expect(requestTarget('http://[')).toBeUndefined();
  });
});
