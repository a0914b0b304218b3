// Loads Public/logic.js as an ES module whatever the Node version. The page
// serves it as a plain .js file (no package.json marks it as a module), and
// Node before 20.19 would read it as CommonJS; a data: URL is always ESM.
import { readFileSync } from "node:fs";

const source = readFileSync(new URL("../../Public/logic.js", import.meta.url), "utf8");
export const logic = await import(
  `data:text/javascript;base64,${Buffer.from(source, "utf8").toString("base64")}`
);
