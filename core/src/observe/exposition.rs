//! The two text formats `GET /metrics` answers in, and which one a scraper gets: the
//! OpenMetrics text a scraper asks for by `Accept` (Prometheus itself does), else the
//! Prometheus text format 0.0.4 (`text/plain; version=0.0.4`), which every older client,
//! `curl` and Prometheus-format parsers read.
//!
//! The registry writes OpenMetrics; [`prometheus_text`] turns that into 0.0.4: a counter
//! family is named by its `_total` sample, `# UNIT` and `# EOF` lines go, `unknown`
//! becomes `untyped`, and exemplars are dropped.

/// A text format of `GET /metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0.0.
    OpenMetrics,
    /// The Prometheus text format 0.0.4.
    Prometheus,
}

/// The content type of an OpenMetrics answer.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of a Prometheus text answer.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

impl Format {
    /// The format for a request's `Accept` header: OpenMetrics when the client accepts
    /// `application/openmetrics-text` at least as much as plain text, else 0.0.4 (also
    /// without `Accept`).
    pub fn negotiate(accept: Option<&str>) -> Format {
        let (mut openmetrics, mut plain) = (0.0_f64, 0.0_f64);
        for range in accept.unwrap_or_default().split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .and_then(|(_, v)| v.trim().parse::<f64>().ok())
                .unwrap_or(1.0);
            match media.as_str() {
                "application/openmetrics-text" => openmetrics = openmetrics.max(q),
                "text/plain" | "text/*" | "*/*" => plain = plain.max(q),
                _ => {}
            }
        }
        if openmetrics > 0.0 && openmetrics >= plain {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        }
    }

    /// The `Content-Type` of an answer in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
            Format::Prometheus => PROMETHEUS_CONTENT_TYPE,
        }
    }
}

/// The Prometheus 0.0.4 text of an OpenMetrics text.
pub fn prometheus_text(openmetrics: &str) -> String {
    let counters: Vec<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let rewritten = match line.strip_prefix("# ") {
            Some(meta) => {
                let (keyword, rest) = meta.split_once(' ').unwrap_or((meta, ""));
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let name = if counters.contains(&name) {
                    format!("{name}_total")
                } else {
                    name.to_string()
                };
                let tail = if keyword == "TYPE" && tail == "unknown" {
                    "untyped"
                } else {
                    tail
                };
                format!("# {keyword} {name} {tail}")
            }
            // A sample; an exemplar (` # {...} value`) has no place in 0.0.4.
            None => line
                .split_once(" # ")
                .map_or(line, |(sample, _)| sample)
                .to_string(),
        };
        out.push_str(rewritten.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_scraper_gets_openmetrics_and_others_get_the_0_0_4_text() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        for (accept, want) in [
            (Some(prometheus), Format::OpenMetrics),
            (Some("application/openmetrics-text"), Format::OpenMetrics),
            (Some("text/plain;version=0.0.4"), Format::Prometheus),
            (
                Some("text/plain; version=0.0.4; q=1, application/openmetrics-text; q=0.5"),
                Format::Prometheus,
            ),
            (Some("application/openmetrics-text;q=0"), Format::Prometheus),
            (Some("*/*"), Format::Prometheus),
            (Some("application/json"), Format::Prometheus),
            (None, Format::Prometheus),
        ] {
            assert_eq!(Format::negotiate(accept), want, "{accept:?}");
        }
        assert!(Format::Prometheus
            .content_type()
            .starts_with("text/plain; version=0.0.4"));
    }

    #[test]
    fn openmetrics_text_becomes_0_0_4() {
        let om = "# HELP skillbox_routes Routing decisions.\n# TYPE skillbox_routes counter\n\
                  skillbox_routes_total{outcome=\"selected\"} 2\n\
                  # HELP skillbox_up Up.\n# TYPE skillbox_up gauge\n# UNIT skillbox_up seconds\nskillbox_up 1\n\
                  # TYPE skillbox_x unknown\nskillbox_x 3 # {trace_id=\"a\"} 1.0\n# EOF\n";
        assert_eq!(
            prometheus_text(om),
            "# HELP skillbox_routes_total Routing decisions.\n# TYPE skillbox_routes_total counter\n\
             skillbox_routes_total{outcome=\"selected\"} 2\n\
             # HELP skillbox_up Up.\n# TYPE skillbox_up gauge\nskillbox_up 1\n\
             # TYPE skillbox_x untyped\nskillbox_x 3\n"
        );
    }
}
