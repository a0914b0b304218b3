// Loads the page's modules (Public/*.js) as ES modules whatever the Node
// version. The page serves them as plain .js files (no package.json marks them
// as modules), and Node before 20.19 would read them as CommonJS; a data: URL
// is always ESM. A data: module cannot resolve "./logic.js", so each relative
// import is pointed at that file loaded the same way, and each file is loaded
// once: every module gets the very instance the others get, as on the page.
import { readdirSync, readFileSync } from "node:fs";

const PUBLIC = new URL("../../Public/", import.meta.url);

/** The text of Public/NAME, as the server sends it. */
export const source = (name) => readFileSync(new URL(name, PUBLIC), "utf8");

/** Every script of the page, by file name. */
export const pageScripts = readdirSync(PUBLIC).filter((name) => name.endsWith(".js")).sort();

// `from "./x.js"` and `import "./x.js"`: the only imports the page writes.
const RELATIVE_IMPORT = /(\bfrom\s*|\bimport\s*)(["'])\.\/([\w.-]+\.js)\2/g;
const urls = new Map();

function moduleUrl(name, importers = []) {
  if (urls.has(name)) return urls.get(name);
  if (importers.includes(name)) throw new Error(`import cycle: ${[...importers, name].join(" -> ")}`);
  const text = source(name).replace(RELATIVE_IMPORT, (_, keyword, quote, dep) => {
    return `${keyword}"${moduleUrl(dep, [...importers, name])}"`;
  });
  const url = `data:text/javascript;base64,${Buffer.from(text, "utf8").toString("base64")}`;
  urls.set(name, url);
  return url;
}

/** Imports Public/NAME and whatever it imports. */
export const loadPublic = (name) => import(moduleUrl(name));

export const { CONTRACT } = await loadPublic("constants.js");
export const logic = await loadPublic("logic.js");
export const i18n = await loadPublic("i18n.js");
