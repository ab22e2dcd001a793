// A finished run's results, kept across visits in localStorage so that a
// reload shows what the page showed. The page reads a kept report back
// through the core (readSuiteReport, readAnalysisReport), which refuses a
// damaged one.

/** Reports longer than this (characters of JSON) are not kept: localStorage holds a few MB for the whole page. */
const LIMIT = 2_000_000;

/** The kept report under `key`: `forget()`, `keep(entry)`, `read()`. */
export function keptReport(key) {
  const forget = () => {
    try {
      localStorage.removeItem(key);
    } catch {
      // Storage disabled: nothing was kept.
    }
  };
  return {
    forget,
    /**
     * Keeps `entry` ({report, ...}) with the time it finished, in place of
     * the one before; returns a note for the status line where it could not.
     */
    keep(entry) {
      forget();
      try {
        const json = JSON.stringify({ finished: Date.now(), ...entry });
        if (json.length > LIMIT) return " It is too large to keep for your next visit.";
        localStorage.setItem(key, json);
        return "";
      } catch {
        return " It could not be kept for your next visit (storage full or disabled).";
      }
    },
    /** The kept entry, or null; throws for one that is not JSON. */
    read() {
      let text;
      try {
        text = localStorage.getItem(key);
      } catch {
        return null; // storage disabled
      }
      return JSON.parse(text);
    },
  };
}

/** " on <date, time>" for a kept entry, or "" where it has no time. */
export const finishedOn = (entry) => (Number.isFinite(entry?.finished) ? ` on ${new Date(entry.finished).toLocaleString()}` : "");
