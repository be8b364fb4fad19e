// Bundles the dashboard: src/main.ts (and the CSS it imports) into content-hashed files under
// OUTDIR/assets/, then writes OUTDIR/index.html naming them. index.html is written last, by
// rename, so a server reading the directory never sees a page that names missing files.
//
//   node build.mjs --outdir DIR [--dev]    (--dev: no minification)
import * as esbuild from "esbuild";
import { mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";

const args = process.argv.slice(2);
const at = args.indexOf("--outdir");
if (at < 0 || !args[at + 1]) {
  console.error("usage: node build.mjs --outdir DIR [--dev]");
  process.exit(2);
}
const outdir = resolve(args[at + 1]);
const dev = args.includes("--dev");
const assets = join(outdir, "assets");
mkdirSync(assets, { recursive: true });

const result = await esbuild.build({
  entryPoints: ["src/main.ts"],
  bundle: true,
  format: "esm",
  target: ["es2020"],
  minify: !dev,
  sourcemap: "linked",
  outdir: assets,
  entryNames: "[name]-[hash]",
  assetNames: "[name]-[hash]",
  metafile: true,
  legalComments: "linked",
  logLevel: "warning",
});

let js = "";
let css = "";
for (const [file, out] of Object.entries(result.metafile.outputs)) {
  if (out.entryPoint === "src/main.ts") {
    js = basename(file);
    if (out.cssBundle) css = basename(out.cssBundle);
  }
}
if (!js || !css) throw new Error("esbuild produced no entry bundle: " + JSON.stringify(result.metafile.outputs));

// Files of earlier builds go: no page names them any more.
const keep = new Set(Object.keys(result.metafile.outputs).map((f) => basename(f)));
for (const f of readdirSync(assets)) if (!keep.has(f)) rmSync(join(assets, f));

const favicon =
  "data:image/svg+xml," +
  encodeURIComponent(
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#2456c7"/><path d="M4 4h8v2H6v1.5h5v2H6V11h6v2H4z" fill="#fff"/></svg>',
  );
const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Embody</title>
<link rel="icon" href="${favicon}">
<link rel="stylesheet" href="/assets/${css}">
<script type="module" src="/assets/${js}"></script>
</head>
<body>
<noscript>The Embody dashboard needs JavaScript.</noscript>
<div id="app"></div>
</body>
</html>
`;
const tmp = join(outdir, ".index.html.tmp");
writeFileSync(tmp, html);
renameSync(tmp, join(outdir, "index.html"));
console.log(`dashboard: ${outdir}/index.html, assets/${js}, assets/${css}`);
