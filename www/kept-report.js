// A finished run's results, kept across visits in localStorage so that a
// reload shows what the page showed. The page reads a kept report back
// through the core (readSuiteReport, readAnalysisReport, readMauveResult,
// readAttackResult: the core's readers), which refuse a damaged one.

/**
 * Reports longer than this (characters of JSON) are not kept: localStorage
 * holds about 5 M characters for the whole site, and the page's texts,
 * history and panels need room too (WMT21's full suite report is 52 K).
 */
const LIMIT = 1_000_000;

/** The kept report under `key`: `keep(report, extra)`, `restore(...)`, `forget()`. */
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
     * Keeps `report` (as JSON, the core's input) and `extra` with the time
     * it finished, in place of the one before; returns a note for the
     * status line where it could not.
     */
    keep(report, extra = {}) {
      forget();
      try {
        const json = JSON.stringify({ ...extra, finished: Date.now(), report: JSON.stringify(report) });
        if (json.length > LIMIT) return " It is too large to keep for your next visit.";
        localStorage.setItem(key, json);
        return "";
      } catch {
        return " It could not be kept for your next visit (storage full or disabled).";
      }
    },
    /**
     * Reads the kept report back with `read(json, entry)` (a core reader) and
     * hands it to `show(value, entry)`; a copy that cannot be read (damaged,
     * or from a version the core no longer reads) is dropped, and
     * `dropped(message)` says why. Nothing kept: nothing happens.
     */
    restore(read, show, dropped) {
      let text;
      try {
        text = localStorage.getItem(key);
      } catch {
        return; // storage disabled
      }
      if (text === null) return;
      try {
        const entry = JSON.parse(text);
        if (typeof entry?.report !== "string") throw new Error("no report in the kept copy");
        show(read(entry.report, entry), entry);
      } catch (err) {
        forget();
        dropped(String(err?.message ?? err));
      }
    },
  };
}

/**
 * How a restored report's status line starts: "(finished on <date, time>)"
 * and, for a report an older version wrote (`tool`: "blindspot X.Y.Z"),
 * "by blindspot X.Y.Z".
 */
export function finished(entry, tool, version) {
  const when = Number.isFinite(entry?.finished) ? ` on ${new Date(entry.finished).toLocaleString()}` : "";
  const older = !tool || tool === `blindspot ${version}` ? "" : ` by ${tool}`;
  return `(finished${when}${older})`;
}
