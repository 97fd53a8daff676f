/** Format a name for display. */
export function formatName(name) {
  return name.trim();
}
