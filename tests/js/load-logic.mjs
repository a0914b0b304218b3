// Loads Public/logic.js as an ES module whatever the Node version. The page
// serves it as a plain .js file (no package.json marks it as a module), and
// Node before 20.19 would read it as CommonJS; a data: URL is always ESM.
// A data: module cannot resolve "./constants.js", so that import is pointed
// at constants.js loaded the same way: the very file the page imports.
import { readFileSync } from "node:fs";

const asModule = (source) => `data:text/javascript;base64,${Buffer.from(source, "utf8").toString("base64")}`;
const read = (name) => readFileSync(new URL(`../../Public/${name}`, import.meta.url), "utf8");

export const constantsSource = read("constants.js");
export const logicSource = read("logic.js");
export const appSource = read("app.js");

const constantsUrl = asModule(constantsSource);
export const { CONTRACT } = await import(constantsUrl);
export const logic = await import(asModule(logicSource.replace(/(["'])\.\/constants\.js\1/, `"${constantsUrl}"`)));
