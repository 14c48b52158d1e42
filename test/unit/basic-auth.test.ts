import bcrypt from 'bcryptjs';
import { afterEach, describe, expect, it, vi, type MockInstance } from 'vitest';
import { BasicAuth, bcryptCost } from '../../src/serve/web/basic-auth.js';

const basic = (user: string, password: string): string => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
/** The outcome of one verification, without its Retry-After. */
const outcomeOf = async (auth: BasicAuth, header: string | undefined, remote?: string): Promise<string> => (await auth.verify(header, remote)).outcome;
// Real hashes at bcrypt's lowest costs, so the comparisons are quick.
const HASH_4 = bcrypt.hashSync('right-password', 4);
const HASH_6 = bcrypt.hashSync('other-password', 6);

afterEach(() => {
  vi.restoreAllMocks();
});

describe('BasicAuth (basic_auth_users)', () => {
  it('answers a cached correct login from the cache after 300 distinct wrong passwords', async () => {
    const auth = new BasicAuth({ prometheus: HASH_4 });
    expect(await outcomeOf(auth, basic('prometheus', 'right-password'))).toBe('ok');
    for (let i = 0; i < 300; i++) expect(await outcomeOf(auth, basic('prometheus', `wrong-${i}`))).toBe('denied');
    const compare = vi.spyOn(bcrypt, 'compare');
    expect(await outcomeOf(auth, basic('prometheus', 'right-password'))).toBe('ok');
    expect(compare).not.toHaveBeenCalled();
    // A repeated wrong password is answered from the failures' cache too.
    expect(await outcomeOf(auth, basic('prometheus', 'wrong-299'))).toBe('denied');
    expect(compare).not.toHaveBeenCalled();
  });

  it('compares unknown users against a decoy of the costliest configured hash', async () => {
    const auth = new BasicAuth({ cheap: HASH_4, dear: HASH_6 });
    const decoy = await auth.decoyHash()!;
    expect(decoy).toMatch(/^\$2[aby]\$06\$.{53}$/);
    const compare = vi.spyOn(bcrypt, 'compare');
    expect(await outcomeOf(auth, basic('nobody', 'right-password'))).toBe('denied');
    expect(compare).toHaveBeenCalledTimes(1);
    expect(bcryptCost(compare.mock.calls[0]![1])).toBe(bcryptCost(HASH_6));
    expect(compare.mock.calls[0]![1]).toBe(decoy);
    // Made once per configuration load, not per request.
    expect(auth.decoyHash()).toBe(auth.decoyHash());
  });

  it('refuses an uncached attempt as busy, without bcrypt, while N comparisons are in flight', async () => {
    const auth = new BasicAuth({ prometheus: HASH_4 }, { maxInFlight: 2 });
    expect(await outcomeOf(auth, basic('prometheus', 'right-password'))).toBe('ok');
    let release: (ok: boolean) => void = () => undefined;
    const gate = new Promise<boolean>((resolve) => (release = resolve));
    const compare = vi.spyOn(bcrypt, 'compare') as unknown as MockInstance<(s: string, hash: string) => Promise<boolean>>;
    compare.mockReturnValue(gate);
    const first = outcomeOf(auth, basic('prometheus', 'wrong-1'), '10.0.0.1');
    const second = outcomeOf(auth, basic('prometheus', 'wrong-2'), '10.0.0.2');
    await vi.waitFor(() => expect(compare).toHaveBeenCalledTimes(2));
    expect(await outcomeOf(auth, basic('prometheus', 'wrong-3'), '10.0.0.3')).toBe('busy');
    // The same attempt as one in flight shares it; a cached login is never busy.
    const again = outcomeOf(auth, basic('prometheus', 'wrong-1'), '10.0.0.3');
    expect(await outcomeOf(auth, basic('prometheus', 'right-password'))).toBe('ok');
    expect(compare).toHaveBeenCalledTimes(2);
    release(false);
    expect([await first, await second, await again]).toEqual(['denied', 'denied', 'denied']);
    // Places are free again.
    compare.mockRestore();
    expect(await outcomeOf(auth, basic('prometheus', 'wrong-3'))).toBe('denied');
  });

  it('lets one client address run two comparisons at a time; other addresses find places', async () => {
    const auth = new BasicAuth({ prometheus: HASH_4 }, { maxInFlight: 4 });
    let release: (ok: boolean) => void = () => undefined;
    const gate = new Promise<boolean>((resolve) => (release = resolve));
    const compare = vi.spyOn(bcrypt, 'compare') as unknown as MockInstance<(s: string, hash: string) => Promise<boolean>>;
    compare.mockImplementation(() => gate);
    const first = outcomeOf(auth, basic('prometheus', 'wrong-1'), '127.0.0.2');
    const second = outcomeOf(auth, basic('prometheus', 'wrong-1b'), '127.0.0.2');
    expect(await auth.verify(basic('prometheus', 'wrong-2'), '::ffff:127.0.0.2')).toEqual({ outcome: 'busy', retryAfterSeconds: 1 });
    const other = outcomeOf(auth, basic('prometheus', 'wrong-3'), '127.0.0.1');
    await vi.waitFor(() => expect(compare).toHaveBeenCalledTimes(3));
    release(false);
    expect([await first, await second, await other]).toEqual(['denied', 'denied', 'denied']);
    compare.mockRestore();
    expect(await outcomeOf(auth, basic('prometheus', 'wrong-2'), '127.0.0.2')).toBe('denied');
  });

  it('denies malformed headers without a comparison', async () => {
    const auth = new BasicAuth({ prometheus: HASH_4 }, { maxInFlight: 0 });
    expect(await outcomeOf(auth, undefined)).toBe('denied');
    expect(await outcomeOf(auth, 'Bearer abc')).toBe('denied');
    expect(await outcomeOf(auth, `Basic ${Buffer.from('no-colon').toString('base64')}`)).toBe('denied');
  });
});
