/**
 * `verify`'s signal handling (src/commands/verify.ts): the first SIGINT/SIGTERM aborts the audit
 * with a line that says what stopping means for an audit, and an audit that does not stop within
 * the bound exits 1 (a difference may be left), never 0 as a stopped `sync` does.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { handleVerifySignals } from '../../src/commands/verify.js';
import { createLogger } from '../../src/log.js';
import { captureLog } from '../helpers/log-capture.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('verify on SIGINT', () => {
  it('aborts the audit, says the comparison ends without repairs, and exits 1 when the audit does not stop in time', async () => {
    const log = captureLog();
    const controller = new AbortController();
    const exit = vi.spyOn(process, 'exit').mockImplementation((() => undefined) as never);
    const signals = handleVerifySignals(controller, createLogger('info', { format: 'json', destination: log }), 20);
    try {
      process.emit('SIGINT');
      expect(controller.signal.aborted).toBe(true);
      expect(signals.received()).toBe('SIGINT');
      expect(log.lines().map((l) => l.msg)).toEqual([expect.stringMatching(/^stopping: the comparison ends without repairs/)]);
      await sleep(60);
      expect(exit).toHaveBeenCalledWith(1);
      expect(log.lines().at(-1)).toMatchObject({ boundMs: 20, msg: expect.stringMatching(/differences may be left$/) });
    } finally {
      signals.dispose();
    }
  });
});
