// A small static file server for dist/, bound to 127.0.0.1 only. Used by serve.sh and the browser tests.
// Usage: node static-server.mjs DIR PORT   (PORT 0 picks a free port; the chosen one is printed)
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, normalize, resolve } from "node:path";

const TYPES = {
  ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".mjs": "text/javascript; charset=utf-8",
  ".wasm": "application/wasm", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png",
  ".json": "application/json",
};

export function serve(dir, port = 0) {
  const root = resolve(dir);
  const server = createServer(async (req, res) => {
    const path = decodeURIComponent(new URL(req.url, "http://127.0.0.1").pathname);
    let file = normalize(join(root, path));
    if (!file.startsWith(root)) { res.writeHead(403).end(); return; }
    if (path.endsWith("/")) file = join(file, "index.html");
    try {
      const body = await readFile(file);
      res.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream", "cache-control": "no-cache" });
      res.end(body);
    } catch {
      // Unknown paths get the app (links may carry any path); missing assets get a 404.
      if (extname(file) === "") {
        res.writeHead(200, { "content-type": TYPES[".html"] }).end(await readFile(join(root, "index.html")));
      } else {
        res.writeHead(404).end("not found");
      }
    }
  });
  return new Promise((ok) => server.listen(port, "127.0.0.1", () => ok(server)));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const server = await serve(process.argv[2] ?? "dist", Number(process.argv[3] ?? 8080));
  console.log(`serving ${process.argv[2] ?? "dist"} on http://127.0.0.1:${server.address().port}/`);
}
