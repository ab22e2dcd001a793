//! A self-contained HTML report of a stress suite: the report card, one
//! chart per test and metric (score against noise ratio, ±1 std band over
//! seeds, the base score dashed), the metric signatures, and the full results
//! as embedded JSON. No scripts, fonts or images to fetch: one file to share.
//! The CLI (`--html`) and the page (download) both write it from here.

use std::fmt::Write;

use super::Verdict;
use super::attack::{AttackEntry, AttackHeader, AttackRun};
use super::suite::{SuiteReport, TestResult};

/// Escapes text for HTML element content and attribute values.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn verdict_label(v: Verdict) -> (&'static str, &'static str) {
    match v {
        Verdict::Pass => ("pass", "✓ pass"),
        Verdict::Fail => ("fail", "✗ fail"),
        Verdict::NonMonotone => ("non_monotone", "↯ non-monotone"),
    }
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:2rem;color:#222}\
table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:.2rem .5rem;text-align:left}\
.pass{background:#0072b2;color:#fff}.fail{background:#d55e00;color:#fff}\
.non_monotone{background:#cc79a7;color:#000}td a{color:inherit;text-decoration:none;display:block}\
.skipped{color:#666;font-style:italic}.charts{display:flex;flex-wrap:wrap;gap:1rem}\
figure{margin:0}figcaption{font-weight:600}svg{width:240px;height:130px}\
.axis{stroke:#888}.base{stroke:#888;stroke-dasharray:4 3}.curve{fill:none;stroke:#0072b2;stroke-width:2}\
.band{fill:#0072b2;opacity:.15}text{font-size:9px;fill:#444}code{font-size:12px}";

/// Ends a report: the exact results embedded as JSON, then the closing tags.
fn end_with_data(out: &mut String, results: &impl serde::Serialize) {
    let json = serde_json::to_string(results)
        .expect("serialisable")
        .replace("</", "<\\/");
    let _ = writeln!(
        out,
        "<h2>Data</h2><p>The exact results, as JSON, are embedded in this file \
         (<code>script#blindspot-results</code>).</p>\
         <script type=\"application/json\" id=\"blindspot-results\">{json}</script></body></html>"
    );
}

/// One chart for metric `m` of `test`.
fn chart(out: &mut String, report: &SuiteReport, test: &TestResult, m: usize) {
    let (w, h, left, right, top, bottom) = (240.0, 130.0, 46.0, 8.0, 8.0, 22.0);
    let base = report.base[m];
    let points: Vec<(f64, f64, f64)> = test
        .levels
        .iter()
        .map(|l| (l.noise_ratio.mean, l.scores[m].mean, l.scores[m].std))
        .collect();
    let x_max = points.iter().map(|p| p.0).fold(1e-9, f64::max);
    let (mut y_min, mut y_max) = (base, base);
    for &(_, y, sd) in &points {
        y_min = y_min.min(y - sd);
        y_max = y_max.max(y + sd);
    }
    if y_max - y_min < 1e-9 {
        (y_min, y_max) = (y_min - 1.0, y_max + 1.0);
    }
    let x = |v: f64| left + v / x_max * (w - left - right);
    let y = |v: f64| top + (1.0 - (v - y_min) / (y_max - y_min)) * (h - top - bottom);
    let (class, label) = verdict_label(test.verdicts[m]);
    let metric = &report.metrics[m];
    let _ = write!(
        out,
        "<figure id=\"{}-{}\"><figcaption>{} <span class=\"{class}\">{label}</span></figcaption>\
         <svg viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}: {label}\">",
        esc(&test.injection),
        esc(&metric.id),
        esc(&metric.name),
        esc(&metric.name)
    );
    let upper: Vec<String> = points
        .iter()
        .map(|p| format!("{:.2},{:.2}", x(p.0), y(p.1 + p.2)))
        .collect();
    let lower: Vec<String> = points
        .iter()
        .rev()
        .map(|p| format!("{:.2},{:.2}", x(p.0), y(p.1 - p.2)))
        .collect();
    let curve: Vec<String> = std::iter::once((0.0, base))
        .chain(points.iter().map(|p| (p.0, p.1)))
        .map(|(a, b)| format!("{:.2},{:.2}", x(a), y(b)))
        .collect();
    let _ = write!(
        out,
        "<line class=\"axis\" x1=\"{left}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\"/>\
         <line class=\"axis\" x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{b}\"/>\
         <line class=\"base\" x1=\"{left}\" y1=\"{yb:.2}\" x2=\"{r}\" y2=\"{yb:.2}\"/>\
         <polygon class=\"band\" points=\"{} {}\"/><polyline class=\"curve\" points=\"{}\"/>\
         <text x=\"{tx}\" y=\"{ty}\" text-anchor=\"end\">{y_max:.3}</text>\
         <text x=\"{tx}\" y=\"{b}\" text-anchor=\"end\">{y_min:.3}</text>\
         <text x=\"{left}\" y=\"{by}\">0</text>\
         <text x=\"{r}\" y=\"{by}\" text-anchor=\"end\">noise {x_max:.2}</text></svg></figure>",
        upper.join(" "),
        lower.join(" "),
        curve.join(" "),
        b = h - bottom,
        r = w - right,
        yb = y(base),
        tx = left - 3.0,
        ty = top + 8.0,
        by = h - 6.0,
    );
}

/// The whole report as one HTML document.
pub fn suite_html(report: &SuiteReport) -> String {
    let mut out = String::new();
    let title = format!("Blindspot stress report: {}", report.dataset);
    let _ = write!(
        out,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\
         <h1>{}</h1><p>{} items · {} seeds per level · {} · rank rule of [BS] §2: a metric fails when a \
         noised set does not score below the original, and is non-monotone when more noise scores higher \
         (variants, such as an error's position, are not held to an order); a level that changed no text \
         is left out.</p>",
        esc(&title),
        esc(&title),
        report.items,
        report.config.seeds,
        esc(&report.tool)
    );
    out.push_str("<h2>Report card</h2><table><thead><tr><th>injection</th>");
    for m in &report.metrics {
        let _ = write!(
            out,
            "<th title=\"{}\">{}</th>",
            esc(&m.signature),
            esc(&m.name)
        );
    }
    out.push_str("</tr></thead><tbody>");
    for test in &report.tests {
        let _ = write!(out, "<tr><th>{}</th>", esc(&test.injection));
        match &test.skipped {
            Some(reason) => {
                let _ = write!(
                    out,
                    "<td class=\"skipped\" colspan=\"{}\">skipped: {}</td>",
                    report.metrics.len(),
                    esc(reason)
                );
            }
            None => {
                for (m, metric) in report.metrics.iter().enumerate() {
                    let (class, label) = verdict_label(test.verdicts[m]);
                    let _ = write!(
                        out,
                        "<td class=\"{class}\"><a href=\"#{}-{}\">{label}</a></td>",
                        esc(&test.injection),
                        esc(&metric.id)
                    );
                }
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    attacks(&mut out, &report.attacks);
    out.push_str("<h2>Metrics</h2><ul>");
    for (m, metric) in report.metrics.iter().enumerate() {
        let _ = write!(
            out,
            "<li>{}: base {:.4}, <code>{}</code></li>",
            esc(&metric.name),
            report.base[m],
            esc(&metric.signature)
        );
    }
    out.push_str("</ul>");
    for test in report.tests.iter().filter(|t| t.skipped.is_none()) {
        let levels: Vec<String> = test.levels.iter().map(|l| l.level.to_string()).collect();
        let _ = write!(
            out,
            "<h2>{}</h2><p>levels {} · noise ratio {}</p><div class=\"charts\">",
            esc(&test.injection),
            levels.join(", "),
            test.levels
                .iter()
                .map(|l| format!("{:.3}", l.noise_ratio.mean))
                .collect::<Vec<_>>()
                .join(", ")
        );
        for m in 0..report.metrics.len() {
            chart(&mut out, report, test, m);
        }
        out.push_str("</div>");
    }
    end_with_data(&mut out, report);
    out
}

/// The models an attack used besides the metric's, escaped.
fn models(h: &AttackHeader) -> String {
    if h.tools.is_empty() {
        "no models besides the metric's".to_owned()
    } else {
        esc(&h.tools.join(" · "))
    }
}

/// The attacks run on the suite's dataset: one row per run, as the attack
/// paper summarises one.
fn attacks(out: &mut String, entries: &[AttackEntry]) {
    if entries.is_empty() {
        return;
    }
    out.push_str(
        "<h2 id=\"attacks\">Attacks</h2><p>Searches for edits that break a metric \
         (<code>blindspot attack</code>) on the same dataset. Success: the goal was met within \
         the query budget; perturbation is the share of words edited where it succeeded; \
         changes are in z units of the metric over the dataset's original texts.</p>\
         <table><thead><tr><th>metric</th><th>goal</th><th>strategy</th><th>budget</th>\
         <th>items</th><th>succeeded</th><th>mean queries</th><th>words perturbed</th>\
         <th>mean change</th><th>models</th></tr></thead><tbody>",
    );
    for a in entries {
        let (h, s) = (&a.header, &a.summary);
        let _ = write!(
            out,
            "<tr><th title=\"{}\">{}</th><td title=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{} ({:.1}%)</td><td>{:.1}</td><td>{:.1}%</td><td>{:+.3} z</td><td>{}</td></tr>",
            esc(&h.signature),
            esc(&h.metric),
            esc(h.config.goal.description()),
            h.config.goal,
            h.config.strategy,
            h.config.budget,
            s.attempted,
            s.succeeded,
            100.0 * s.success_rate,
            s.mean_queries,
            s.mean_perturbed_pct,
            s.mean_change_z,
            models(h)
        );
    }
    out.push_str("</tbody></table>");
}

/// `text` with its edits marked (`<mark>` for changed words, ⌫ where words
/// were deleted).
fn marked(text: &str, edits: &[crate::inject::Edit]) -> String {
    let mut out = String::new();
    let mut at = 0;
    for e in edits {
        out.push_str(&esc(&text[at..e.start]));
        match e.kind {
            crate::inject::EditKind::Deleted => out.push_str("<span class=\"del\">⌫</span>"),
            crate::inject::EditKind::Changed => {
                let _ = write!(out, "<mark>{}</mark>", esc(&text[e.start..e.end]));
            }
        }
        at = e.end;
    }
    out.push_str(&esc(&text[at..]));
    out
}

/// A self-contained HTML report of an attack run: the summary as the
/// attack paper reports it, the settings, and every item with its found
/// text marked; the exact results embedded as JSON.
pub fn attack_html(run: &AttackRun) -> String {
    let h = &run.header;
    let s = run.summary();
    let mut out = String::new();
    let title = format!(
        "Blindspot attack report: {} / {} on {} ({})",
        h.config.goal, h.config.strategy, h.metric, h.dataset
    );
    let _ = write!(
        out,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}\
         mark{{background:#ffe08a}}.del{{color:#d55e00;font-weight:700}}td.t{{max-width:36rem}}</style></head><body>\
         <h1>{t}</h1><p>{} · {}</p><h2>Summary</h2><table><tbody>\
         <tr><th>items attacked</th><td>{}</td></tr><tr><th>succeeded</th><td>{} ({:.1}%)</td></tr>\
         <tr><th>mean queries per item</th><td>{:.1}</td></tr>\
         <tr><th>words perturbed where it succeeded</th><td>{:.1}%</td></tr>\
         <tr><th>mean score change</th><td>{:+.3} z</td></tr>\
         <tr><th>z scale</th><td>mean {:.4}, std {:.4} over {} original texts</td></tr>\
         </tbody></table><h2>Settings</h2><p><code>{}</code></p><p>{}</p>",
        esc(&h.tool),
        models(h),
        s.attempted,
        s.succeeded,
        100.0 * s.success_rate,
        s.mean_queries,
        s.mean_perturbed_pct,
        s.mean_change_z,
        h.z.mean,
        h.z.std,
        h.z.count,
        esc(&h.signature),
        esc(&serde_json::to_string(&h.config).expect("serialisable")),
        t = esc(&title),
    );
    out.push_str(
        "<h2>Items</h2><table><thead><tr><th>id</th><th>result</th><th>score</th><th>change</th>\
         <th>words</th><th>queries</th><th>text found</th></tr></thead><tbody>",
    );
    for o in &run.outcomes {
        let (class, label) = if o.success {
            ("pass", "goal met")
        } else {
            ("fail", "not met")
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"{class}\">{label}</td><td>{:.4} → {:.4}</td><td>{:+.2} z</td>\
             <td>{}</td><td>{}</td><td class=\"t\">{}</td></tr>",
            esc(&o.id),
            o.score,
            o.final_score,
            o.change_z,
            o.words_changed,
            o.queries,
            marked(&o.text, &o.edits)
        );
    }
    out.push_str("</tbody></table>");
    end_with_data(&mut out, run);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc("<a href=\"x\">&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
    }
}
