// The baseline of the /metrics benchmark: a bare node:http server that answers every request
// with the same bytes (a /metrics body saved from `serve`). Usage: node bare-server.mjs FILE CONTENT-TYPE
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';

const [file, contentType] = process.argv.slice(2);
const body = readFileSync(file);
const server = createServer((req, res) => {
  req.resume();
  res.writeHead(200, { 'content-type': contentType, 'content-length': body.length, 'cache-control': 'no-store' });
  res.end(body);
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening on http://127.0.0.1:${server.address().port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
