/**
 * The serializers' output collector: lines joined into flat strings or UTF-8 chunks a few thousand
 * at a time, since text built by `+=` is a rope several times its own size until flattened.
 */

export class Lines {
  readonly #lines: string[] = [];
  readonly #chunks: string[] = [];
  readonly #encoded: Buffer[] = [];
  readonly #part: boolean;
  /** UTF-8 bytes pushed so far (part mode only). */
  bytes = 0;
  /** {@link bytes} at the last family's first sample line. */
  bodyAt = 0;

  /** @param part counts {@link bytes} and encodes each chunk as soon as it is joined. */
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

  /** Written chunk by chunk into one buffer, no joined string. */
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
