import { describe, expect, it } from 'vitest';
import { DatabaseError, TokenRequestError, UpstreamHttpError } from '../../src/errors.js';
import { MAX_CAUSE_DEPTH, createLogger, resolveLogFormat, serializeError } from '../../src/log.js';
import { captureLog } from '../helpers/log-capture.js';

describe('resolveLogFormat', () => {
  it.each([
    ['auto', true, 'pretty'],
    ['auto', false, 'json'],
    ['json', true, 'json'],
    ['pretty', false, 'pretty'],
  ] as const)('%s on a terminal: %s → %s', (format, isTTY, expected) => {
    expect(resolveLogFormat(format, { isTTY, write: () => true })).toBe(expected);
  });

  it('treats a destination that does not say it is a terminal as none', () => {
    expect(resolveLogFormat('auto', { write: () => true })).toBe('json');
  });
});

describe('serializeError', () => {
  const pgRefused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

  it('gives type, code and message, and the cause chain in the same shape, without stacks', () => {
    const err = new DatabaseError('the database is unreachable', { cause: pgRefused });
    expect(serializeError(err)).toEqual({
      type: 'DatabaseError',
      code: 'ERR_DATABASE',
      message: 'the database is unreachable',
      cause: { type: 'Error', code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 127.0.0.1:5432' },
    });
  });

  it('carries the HTTP status where the error has one', () => {
    const err = new UpstreamHttpError('analytics', 503, 'E6: HTTP 503');
    expect(serializeError(err)).toEqual({ type: 'UpstreamHttpError', code: 'ERR_UPSTREAM_HTTP', status: 503, message: 'E6: HTTP 503' });
  });

  it('adds the stack of every error in the chain when asked', () => {
    const err = new TokenRequestError('token request failed', { cause: pgRefused });
    const out = serializeError(err, { stack: true });
    expect(out.stack).toMatch(/^TokenRequestError: token request failed\n\s+at /);
    expect(out.cause?.stack).toMatch(/^Error: connect ECONNREFUSED/);
  });

  it('coerces what is not an Error, and names an AggregateError by its inner errors', () => {
    expect(serializeError('plain text')).toEqual({ type: 'Error', message: 'plain text' });
    expect(serializeError({ some: 'object' })).toEqual({ type: 'Error', message: 'non-error thrown: {"some":"object"}' });
    const aggregate = new AggregateError([new Error('connect ECONNREFUSED ::1:5432'), new Error('connect ECONNREFUSED 127.0.0.1:5432')]);
    expect(serializeError(Object.assign(aggregate, { code: 'ECONNREFUSED' }))).toEqual({
      type: 'AggregateError',
      code: 'ECONNREFUSED',
      message: 'connect ECONNREFUSED ::1:5432; connect ECONNREFUSED 127.0.0.1:5432',
    });
  });

  it('stops at a cycle and below MAX_CAUSE_DEPTH causes', () => {
    const looped = new Error('looped');
    (looped as { cause?: unknown }).cause = looped;
    expect(serializeError(looped)).toEqual({ type: 'Error', message: 'looped' });

    let deep: Error = new Error('level 0');
    for (let i = 1; i <= MAX_CAUSE_DEPTH + 3; i++) deep = new Error(`level ${i}`, { cause: deep });
    let depth = 0;
    for (let e = serializeError(deep).cause; e !== undefined; e = e.cause) depth++;
    expect(depth).toBe(MAX_CAUSE_DEPTH);
  });
});

describe('createLogger', () => {
  const err = new DatabaseError('migration failed', { cause: new Error('relation exists') });

  it('logs err through the serializer: no stack at info, the stack at debug', () => {
    const info = captureLog();
    createLogger('info', { format: 'json', destination: info }).error({ err }, 'failed');
    expect(info.lines()[0]).toMatchObject({ level: 'error', msg: 'failed', err: { type: 'DatabaseError', code: 'ERR_DATABASE', message: 'migration failed' } });
    expect(info.text()).not.toContain('"stack"');
    expect(info.text()).not.toContain('"type":"Object"');

    const debug = captureLog();
    createLogger('debug', { format: 'json', destination: debug }).error({ err }, 'failed');
    const logged = debug.lines()[0]!.err as { stack?: string; cause?: { stack?: string } };
    expect(logged.stack).toMatch(/^DatabaseError: migration failed\n/);
    expect(logged.cause?.stack).toMatch(/^Error: relation exists\n/);
  });

  it('auto writes JSON lines when the destination is not a terminal, pretty lines when it is', () => {
    const pipe = captureLog(false);
    createLogger('info', { destination: pipe }).info({ runId: 7 }, 'sync run started');
    expect(pipe.lines()[0]).toMatchObject({ level: 'info', runId: 7, msg: 'sync run started' });

    const tty = captureLog(true);
    createLogger('info', { destination: tty }).info({ runId: 7 }, 'sync run started');
    // NO_COLOR may or may not be set where the tests run: compare without colours.
    const plain = tty.text().replace(/\x1b\[[0-9;]*m/g, '');
    expect(plain).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: sync run started \{"runId":7\}\n$/);
  });

  it.each(['json', 'pretty'] as const)('keeps secrets redacted in %s lines', (format) => {
    const out = captureLog();
    createLogger('info', { format, destination: out }).warn({ clientSecret: 'hunter2-secret', headers: { authorization: 'Bearer tok-123' } }, 'oops');
    expect(out.text()).toContain('[redacted]');
    expect(out.text()).not.toContain('hunter2-secret');
    expect(out.text()).not.toContain('tok-123');
  });
});
