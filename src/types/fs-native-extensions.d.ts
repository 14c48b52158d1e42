/** The part of `fs-native-extensions` (holepunch) this project uses: advisory locks on a file descriptor. */
declare module 'fs-native-extensions' {
  /** Takes an exclusive (or, with `shared`, a shared) lock without waiting; false when it is held elsewhere. Throws on an fs error. */
  function tryLock(fd: number, offset?: number, length?: number, options?: { shared?: boolean }): boolean;
  /** Releases a lock taken with tryLock. */
  function unlock(fd: number, offset?: number, length?: number): void;
  const fsx: { tryLock: typeof tryLock; unlock: typeof unlock };
  export default fsx;
}
