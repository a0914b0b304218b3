// Small DOM helpers that app.js and share.js both draw with: how the page
// writes text, marks a control as taking no presses, and scrolls.

export function setText(node, text) {
  // Skip no-op writes: re-setting identical text can make screen readers
  // re-announce a live region.
  if (node.textContent !== text) node.textContent = text;
}

/** Whether a control takes no presses now (disabled, or aria-disabled while it waits). */
export function inert(node) {
  return node.disabled || node.getAttribute("aria-disabled") === "true";
}

export function setInert(node, value) {
  if (value) node.setAttribute("aria-disabled", "true");
  else node.removeAttribute("aria-disabled");
}

/** Whether a control cannot hold the focus now: disabled, or hidden itself or by an ancestor. */
export function gone(node) {
  return node.disabled || node.hidden || Boolean(node.closest("[hidden]"));
}

/** Scrolls `node` into view at `block`, without the glide for those who asked for less motion. */
export function bringIntoView(node, block) {
  const still = matchMedia("(prefers-reduced-motion: reduce)").matches;
  node.scrollIntoView({ block, behavior: still ? "auto" : "smooth" });
}
