//! Secrets by placeholder (docs/permissions.md): a secret a skill binds to hosts
//! (`permissions.secrets`) reaches its programs as a placeholder, `skillbox-secret:<random>`,
//! made for the one call; the egress proxy puts the value in place of the placeholder in
//! requests to the bound hosts only, and refuses a request that carries it anywhere else.
//!
//! The placeholder is worthless outside the proxy, so a program that hides it (encodes,
//! splits it) only keeps the value from itself. What the proxy guards is the value: it
//! never writes it toward an unbound host, and it masks it in the answers' headers and
//! bodies so that a server echoing the request does not hand it to the program.

use std::collections::BTreeMap;

use base64::Engine;
use skillbox_protocol::methods::SecretValue;
use skillbox_protocol::skill::network::NetworkPattern;
use skillbox_protocol::skill::SecretBinding;

use crate::proxy::policy::{check_declared, parse_patterns};
use crate::proxy::target::Target;
use crate::random::{self, RandomError, RandomSource};

/// What every placeholder starts with.
pub const PLACEHOLDER_PREFIX: &str = "skillbox-secret:";

/// One secret of a call: its name, the call's placeholder and the value behind it, and
/// the hosts that may receive the value.
struct Bound {
    name: String,
    /// The placeholder as the program has it, then as a URL encodes its `:`.
    forms: [String; 3],
    value: SecretValue,
    hosts: Vec<String>,
    patterns: Vec<NetworkPattern>,
}

/// A request carried a placeholder toward a host its secret is not bound to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the placeholder of secret {name} was sent to {host} in the request {place}, but {name} is \
     bound to {hosts:?} only; the request was refused and logged as an exfiltration attempt"
)]
pub struct Leak {
    /// The secret's name.
    pub name: String,
    /// Where the request went.
    pub host: String,
    /// Where in the request (`line`, `header X`, `body`).
    pub place: String,
    /// The hosts it is bound to.
    pub hosts: Vec<String>,
}

/// The bound secrets of one call (empty for a skill that binds none).
#[derive(Default)]
pub struct CallSecrets {
    bound: Vec<Bound>,
}

impl std::fmt::Debug for CallSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.bound.iter().map(|b| b.name.as_str()).collect();
        f.debug_struct("CallSecrets")
            .field("names", &names)
            .finish()
    }
}

impl CallSecrets {
    /// Makes a placeholder for each binding whose value `values` holds: the placeholders
    /// go in the call's environment (returned), the values stay here. A binding without a
    /// value gets no variable, as a `permissions.env` name without one.
    pub fn bind(
        bindings: &[SecretBinding],
        values: &BTreeMap<String, SecretValue>,
        rng: &dyn RandomSource,
    ) -> Result<(BTreeMap<String, SecretValue>, Self), RandomError> {
        let mut env = BTreeMap::new();
        let mut bound = Vec::new();
        for binding in bindings {
            let Some(value) = values.get(&binding.name) else {
                continue;
            };
            let placeholder = format!(
                "{PLACEHOLDER_PREFIX}{}",
                random::token(rng, "secret placeholder")?
            );
            env.insert(binding.name.clone(), SecretValue(placeholder.clone()));
            let rest = &placeholder[PLACEHOLDER_PREFIX.len()..];
            bound.push(Bound {
                name: binding.name.clone(),
                forms: [
                    placeholder.clone(),
                    format!("skillbox-secret%3A{rest}"),
                    format!("skillbox-secret%3a{rest}"),
                ],
                value: value.clone(),
                hosts: binding.hosts.clone(),
                patterns: parse_patterns(&binding.hosts),
            });
        }
        Ok((env, Self { bound }))
    }

    /// Whether the call has no bound secret (its connections are tunnelled untouched).
    pub fn is_empty(&self) -> bool {
        self.bound.is_empty()
    }

    /// The hosts of every binding: a bound host is reachable as a declared one.
    pub fn hosts(&self) -> impl Iterator<Item = &String> {
        self.bound.iter().flat_map(|b| b.hosts.iter())
    }

    /// `bytes`, a part of a request to `target` (`place` names it), with each placeholder
    /// of a secret bound to `target` replaced by its value; `Err` when it carries the
    /// placeholder of a secret bound elsewhere. `None`: nothing to replace.
    pub(crate) fn rewrite(
        &self,
        bytes: &[u8],
        target: &Target,
        place: &str,
    ) -> Result<Option<Vec<u8>>, Leak> {
        if find(bytes, b"skillbox-secret").is_none() {
            return Ok(None);
        }
        let mut out: Option<Vec<u8>> = None;
        for b in &self.bound {
            let current = out.as_deref().unwrap_or(bytes);
            if !b
                .forms
                .iter()
                .any(|f| find(current, f.as_bytes()).is_some())
            {
                continue;
            }
            let allowed = check_declared(&b.hosts, &b.patterns, target, String::new()).is_ok();
            if !allowed {
                return Err(Leak {
                    name: b.name.clone(),
                    host: target.host.clone(),
                    place: place.to_string(),
                    hosts: b.hosts.clone(),
                });
            }
            let mut replaced = current.to_vec();
            for form in &b.forms {
                replaced = replace_all(&replaced, form.as_bytes(), b.value.0.as_bytes());
            }
            out = Some(replaced);
        }
        Ok(out)
    }

    /// A header value of a request to `target`: as [`Self::rewrite`], looking inside
    /// `Basic` credentials too (base64 of `user:password`, where API keys often go).
    pub(crate) fn rewrite_header(
        &self,
        name: &str,
        value: &[u8],
        target: &Target,
    ) -> Result<Option<Vec<u8>>, Leak> {
        let place = format!("header {name}");
        let basic = name.eq_ignore_ascii_case("authorization")
            && value.len() > 6
            && value[..6].eq_ignore_ascii_case(b"basic ");
        if basic {
            let engine = base64::engine::general_purpose::STANDARD;
            let encoded = value[6..].trim_ascii();
            if let Ok(decoded) = engine.decode(encoded) {
                if let Some(plain) = self.rewrite(&decoded, target, &place)? {
                    let mut out = b"Basic ".to_vec();
                    out.extend_from_slice(engine.encode(plain).as_bytes());
                    return Ok(Some(out));
                }
            }
        }
        self.rewrite(value, target, &place)
    }

    /// `bytes` from a server with every secret's value masked (`*` of the same length, so
    /// that lengths hold); `None`: no value in it.
    pub fn mask(&self, bytes: &[u8]) -> Option<Vec<u8>> {
        let mut out: Option<Vec<u8>> = None;
        for b in &self.bound {
            let value = b.value.0.as_bytes();
            if value.is_empty() {
                continue;
            }
            let current = out.as_deref().unwrap_or(bytes);
            if find(current, value).is_some() {
                let stars = vec![b'*'; value.len()];
                out = Some(replace_all(current, value, &stars));
            }
        }
        out
    }

    /// The longest value: a body masker keeps this many bytes less one between frames,
    /// so that a value split across two is still found.
    pub fn longest_value(&self) -> usize {
        self.bound
            .iter()
            .map(|b| b.value.0.len())
            .max()
            .unwrap_or(0)
    }
}

/// The first index of `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `hay` with every `needle` replaced by `with`.
fn replace_all(hay: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut rest = hay;
    while let Some(i) = find(rest, needle) {
        out.extend_from_slice(&rest[..i]);
        out.extend_from_slice(with);
        rest = &rest[i + needle.len()..];
    }
    out.extend_from_slice(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::SystemSource;

    fn secrets() -> (BTreeMap<String, SecretValue>, CallSecrets) {
        let bindings = vec![SecretBinding {
            name: "API_KEY".into(),
            hosts: vec!["api.test".into()],
        }];
        let mut values = BTreeMap::new();
        values.insert("API_KEY".to_string(), SecretValue("sk-real-123".into()));
        values.insert("OTHER".to_string(), SecretValue("unused".into()));
        CallSecrets::bind(&bindings, &values, &SystemSource::default()).unwrap()
    }

    fn target(url: &str) -> Target {
        Target::parse(url).unwrap()
    }

    #[test]
    fn the_program_sees_a_placeholder_made_for_the_call() {
        let (env, s) = secrets();
        let placeholder = &env["API_KEY"].0;
        assert!(placeholder.starts_with(PLACEHOLDER_PREFIX), "{placeholder}");
        assert!(!placeholder.contains("sk-real"));
        assert!(
            !env.contains_key("OTHER"),
            "only bound names get a variable"
        );
        let (again, _) = secrets();
        assert_ne!(
            again["API_KEY"].0, *placeholder,
            "a new placeholder per call"
        );
        assert!(!s.is_empty());
    }

    #[test]
    fn a_bound_host_gets_the_value_in_line_query_and_headers() {
        let (env, s) = secrets();
        let p = &env["API_KEY"].0;
        let api = target("https://api.test/v1");
        let line = format!("/v1/x?key={p}");
        let out = s.rewrite(line.as_bytes(), &api, "line").unwrap().unwrap();
        assert_eq!(out, b"/v1/x?key=sk-real-123");
        let encoded = p.replace(':', "%3A");
        let out = s
            .rewrite(format!("?k={encoded}").as_bytes(), &api, "line")
            .unwrap()
            .unwrap();
        assert_eq!(out, b"?k=sk-real-123", "a URL-encoded placeholder too");
        let bearer = format!("Bearer {p}");
        let out = s.rewrite_header("Authorization", bearer.as_bytes(), &api);
        assert_eq!(out.unwrap().unwrap(), b"Bearer sk-real-123");
        let engine = base64::engine::general_purpose::STANDARD;
        let basic = format!("Basic {}", engine.encode(format!("user:{p}")));
        let out = s
            .rewrite_header("authorization", basic.as_bytes(), &api)
            .unwrap()
            .unwrap();
        assert_eq!(
            out,
            format!("Basic {}", engine.encode("user:sk-real-123")).as_bytes()
        );
        assert_eq!(s.rewrite(b"no placeholder", &api, "body").unwrap(), None);
    }

    #[test]
    fn an_unbound_host_is_refused_wherever_the_placeholder_is() {
        let (env, s) = secrets();
        let p = &env["API_KEY"].0;
        let evil = target("https://evil.test/");
        for (place, bytes) in [
            ("line", format!("/steal?k={p}")),
            ("header X-Key", p.clone()),
            ("body", format!("{{\"k\":\"{p}\"}}")),
        ] {
            let leak = s.rewrite(bytes.as_bytes(), &evil, place).unwrap_err();
            assert_eq!(leak.name, "API_KEY");
            assert_eq!(leak.host, "evil.test");
            assert!(leak.to_string().contains("exfiltration"), "{leak}");
        }
        // Another port of the bound name is another host.
        let other_port = target("https://api.test:8443/");
        assert!(s.rewrite(p.as_bytes(), &other_port, "line").is_err());
    }

    #[test]
    fn values_in_answers_are_masked_to_the_same_length() {
        let (_, s) = secrets();
        let out = s.mask(b"{\"echo\":\"sk-real-123\"}").unwrap();
        assert_eq!(out, b"{\"echo\":\"***********\"}");
        assert_eq!(s.mask(b"nothing"), None);
        assert_eq!(s.longest_value(), "sk-real-123".len());
    }
}
