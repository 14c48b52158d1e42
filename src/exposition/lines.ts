/**
 * The output collector of the serializers: lines joined into flat strings or UTF-8 chunks a few
 * thousand at a time, so that a large exposition never exists as a rope of small strings.
 */

/**
 * Collects output lines and joins them into flat strings, a few thousand lines at a time. Text
 * built by `+=` is a rope of one object per piece until it is flattened: for 100,000 samples
 * that is several times the size of the text itself, at the moment the serializer returns.
 */
export class Lines {
  readonly #lines: string[] = [];
  readonly #chunks: string[] = [];
  /** In part mode, the chunks as UTF-8. */
  readonly #encoded: Buffer[] = [];
  readonly #part: boolean;
  /** UTF-8 bytes pushed so far, in part mode (see the constructor). */
  bytes = 0;
  /** {@link bytes} where the last family's first sample line starts (after its metadata lines). */
  bodyAt = 0;

  /**
   * @param part part mode, for a large output that {@link toBuffer} ends and whose caller
   *   records where each family lies: keeps {@link bytes}, and encodes each chunk as soon as it
   *   is joined, so the output is never held as strings on the collected heap.
   */
  constructor(part = false) {
    this.#part = part;
  }

  push(line: string): void {
    if (this.#part) this.bytes += Buffer.byteLength(line);
    this.#lines.push(line);
    if (this.#lines.length >= 4096) this.#flush();
  }

  #flush(): void {
    if (this.#part) this.#encoded.push(Buffer.from(this.#lines.join('')));
    else this.#chunks.push(this.#lines.join(''));
    this.#lines.length = 0;
  }

  toString(): string {
    if (this.#part) return this.toBuffer().toString();
    this.#chunks.push(this.#lines.join(''));
    this.#lines.length = 0;
    const text = this.#chunks.length === 1 ? this.#chunks[0]! : this.#chunks.join('');
    this.#chunks.length = 0;
    return text;
  }

  /** The output as UTF-8, written chunk by chunk into one buffer (no joined string on the way). */
  toBuffer(): Buffer {
    if (this.#part) {
      this.#flush();
      const buffer = Buffer.concat(this.#encoded, this.bytes);
      this.#encoded.length = 0;
      return buffer;
    }
    this.#chunks.push(this.#lines.join(''));
    this.#lines.length = 0;
    let size = 0;
    for (const chunk of this.#chunks) size += Buffer.byteLength(chunk);
    const buffer = Buffer.allocUnsafe(size);
    let at = 0;
    for (const chunk of this.#chunks) at += buffer.write(chunk, at);
    this.#chunks.length = 0;
    return buffer;
  }
}
