/** The part of `fs-native-extensions` (holepunch) this project uses: advisory locks on a file descriptor. */
declare module 'fs-native-extensions' {
  const fsx: {
    /** Takes an exclusive (or, with `shared`, a shared) lock without waiting; false when it is held elsewhere. Throws on an fs error. */
    tryLock(fd: number, offset?: number, length?: number, options?: { shared?: boolean }): boolean;
    /** Releases a lock taken with tryLock. */
    unlock(fd: number, offset?: number, length?: number): void;
  };
  export default fsx;
}
