//! What the observability routes and the console read: every routing decision (the
//! `routes` table, kept to `[observe] routes_kept` newest), recent calls with filters,
//! and every pin across contexts.

use rusqlite::{params, OptionalExtension, TransactionBehavior};
use serde::Serialize;
use serde_json::Value;
use skillbox_protocol::result::ErrorKind;

use super::{CallRecord, Store, StoreError};

/// One stored routing decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouteRecord {
    /// Its id (`rt_…`).
    pub route_id: String,
    /// When it was decided, Unix milliseconds.
    pub at: i64,
    /// The query.
    pub query: String,
    /// The context it was routed for.
    pub context_id: Option<String>,
    /// The skill the task went to, if any.
    pub primary: Option<String>,
    /// The whole activation plan, as `POST /v1/route` answered it.
    pub plan: Value,
    /// Who asked: a bot's name, or `operator`.
    pub caller: String,
}

/// Which recent calls to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallFilter {
    /// Only this skill's calls.
    pub skill: Option<String>,
    /// Only successes (`Some(None)`), or only failures of this kind (`Some(Some(kind))`).
    pub outcome: Option<Option<ErrorKind>>,
    /// Only the calls of this caller (a bot's name, or `operator`).
    pub caller: Option<String>,
}

/// A skill pinned in a context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextPin {
    /// The context.
    pub context_id: String,
    /// The skill.
    pub skill: String,
}

fn read_failed(what: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |source| StoreError::ReadHistory { what, source }
}

fn route_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RouteRecord> {
    let plan: String = row.get(5)?;
    Ok(RouteRecord {
        route_id: row.get(0)?,
        at: row.get(1)?,
        query: row.get(2)?,
        context_id: row.get(3)?,
        primary: row.get(4)?,
        plan: serde_json::from_str(&plan).unwrap_or(Value::Null),
        caller: row.get(6)?,
    })
}

const ROUTE_COLUMNS: &str = "route_id, at, query, context_id, primary_skill, plan_json, caller";

impl Store {
    /// Stores a routing decision and drops all but the `keep` newest (with the events
    /// of the dropped ones), in one transaction.
    pub fn record_route(&self, route: &RouteRecord, keep: usize) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        let mut write = || -> rusqlite::Result<()> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            tx.execute(
                &format!(
                    "INSERT INTO routes ({ROUTE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
                ),
                params![
                    route.route_id,
                    route.at,
                    route.query,
                    route.context_id,
                    route.primary,
                    route.plan.to_string(),
                    route.caller,
                ],
            )?;
            let dropped = tx.execute(
                "DELETE FROM routes WHERE rowid IN \
                 (SELECT rowid FROM routes ORDER BY at DESC, rowid DESC LIMIT -1 OFFSET ?1)",
                [keep],
            )?;
            if dropped > 0 {
                tx.execute(
                    "DELETE FROM route_events WHERE route_id NOT IN (SELECT route_id FROM routes)",
                    [],
                )?;
            }
            tx.commit()
        };
        write().map_err(|source| StoreError::RecordRoute {
            route_id: route.route_id.clone(),
            source,
        })
    }

    /// The `limit` newest routing decisions, newest first: all, or those of one caller.
    pub fn recent_routes(
        &self,
        caller: Option<&str>,
        limit: usize,
    ) -> Result<Vec<RouteRecord>, StoreError> {
        let conn = self.conn();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let read = || -> rusqlite::Result<Vec<RouteRecord>> {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {ROUTE_COLUMNS} FROM routes WHERE ?1 IS NULL OR caller = ?1 \
                 ORDER BY at DESC, rowid DESC LIMIT ?2"
            ))?;
            let rows = stmt.query_map(params![caller, limit], route_from_row)?;
            rows.collect()
        };
        read().map_err(read_failed("routes"))
    }

    /// One routing decision.
    pub fn get_route(&self, route_id: &str) -> Result<Option<RouteRecord>, StoreError> {
        self.conn()
            .query_row(
                &format!("SELECT {ROUTE_COLUMNS} FROM routes WHERE route_id = ?1"),
                [route_id],
                route_from_row,
            )
            .optional()
            .map_err(read_failed("routes"))
    }

    /// The `limit` newest calls that pass `filter`, newest first.
    pub fn recent_calls(
        &self,
        filter: &CallFilter,
        limit: usize,
    ) -> Result<Vec<CallRecord>, StoreError> {
        // Calls still queued for the writer thread are part of the history.
        self.flush_calls();
        let conn = self.conn();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let (outcome_set, success, kind) = match &filter.outcome {
            None => (false, true, None),
            Some(None) => (true, true, None),
            Some(Some(kind)) => (true, false, Some(kind.as_str())),
        };
        let read = || -> rusqlite::Result<Vec<String>> {
            let mut stmt = conn.prepare_cached(
                "SELECT call_id FROM calls \
                 WHERE (?1 IS NULL OR skill = ?1) \
                   AND (?2 = 0 OR (success = ?3 AND (?4 IS NULL OR error_kind = ?4))) \
                   AND (?6 IS NULL OR caller = ?6) \
                 ORDER BY started_at DESC, rowid DESC LIMIT ?5",
            )?;
            let ids = stmt.query_map(
                params![
                    filter.skill,
                    outcome_set,
                    success,
                    kind,
                    limit,
                    filter.caller
                ],
                |row| row.get::<_, String>(0),
            )?;
            ids.collect()
        };
        let ids = read().map_err(read_failed("calls"))?;
        drop(conn);
        let mut calls = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(call) = self.get_call(&id)? {
                calls.push(call);
            }
        }
        Ok(calls)
    }

    /// Every pin, by context then skill.
    pub fn all_pins(&self) -> Result<Vec<ContextPin>, StoreError> {
        let conn = self.conn();
        let read = || -> rusqlite::Result<Vec<ContextPin>> {
            let mut stmt = conn.prepare_cached(
                "SELECT context_id, skill FROM contexts ORDER BY context_id, skill",
            )?;
            let rows = stmt.query_map([], |row| {
                Ok(ContextPin {
                    context_id: row.get(0)?,
                    skill: row.get(1)?,
                })
            })?;
            rows.collect()
        };
        read().map_err(read_failed("pins"))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn open() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Store::db_path(dir.path())).unwrap();
        (dir, store)
    }

    fn route(id: &str, at: i64) -> RouteRecord {
        RouteRecord {
            route_id: id.into(),
            at,
            query: format!("query {id}"),
            context_id: None,
            primary: Some("notes".into()),
            plan: json!({"route_id": id, "candidates": []}),
            caller: if at % 2 == 0 { "bot-a" } else { "operator" }.into(),
        }
    }

    #[test]
    fn routes_are_kept_to_the_limit_newest_first() {
        let (_dir, store) = open();
        for i in 0..5 {
            store
                .record_route(&route(&format!("rt_{i}"), 1000 + i), 3)
                .unwrap();
        }
        let ids: Vec<String> = store
            .recent_routes(None, 10)
            .unwrap()
            .into_iter()
            .map(|r| r.route_id)
            .collect();
        assert_eq!(ids, ["rt_4", "rt_3", "rt_2"]);
        assert!(store.get_route("rt_0").unwrap().is_none());
        let kept = store.get_route("rt_3").unwrap().unwrap();
        assert_eq!(kept.plan["route_id"], "rt_3");
        assert_eq!(store.recent_routes(None, 1).unwrap().len(), 1);
        let of_bot: Vec<String> = (store.recent_routes(Some("bot-a"), 10).unwrap())
            .into_iter()
            .map(|r| r.route_id)
            .collect();
        assert_eq!(of_bot, ["rt_4", "rt_2"]);
    }

    #[test]
    fn dropping_a_route_drops_its_events() {
        let (_dir, store) = open();
        store.record_route(&route("rt_a", 1), 1).unwrap();
        store
            .record_route_events(&[crate::state::store::RouteEvent {
                route_id: "rt_a".into(),
                seq: 0,
                from_state: "planned".into(),
                to_state: "running".into(),
                skill: None,
                tool: None,
                reason: "r".into(),
                at: 1,
            }])
            .unwrap();
        store.record_route(&route("rt_b", 2), 1).unwrap();
        assert!(store.route_events("rt_a").unwrap().is_empty());
    }

    #[test]
    fn recent_calls_filter_by_skill_and_outcome() {
        let (_dir, store) = open();
        let call = |id: &str, skill: &str, at: i64, kind: Option<ErrorKind>| CallRecord {
            call_id: id.into(),
            skill: skill.into(),
            tool: "run".into(),
            started_at: at,
            duration_ms: 1,
            success: kind.is_none(),
            error_kind: kind,
            caller: if skill == "mail" { "bot-a" } else { "operator" }.into(),
            egress: Vec::new(),
            egress_unlisted: 0,
        };
        store.record_call(&call("c1", "notes", 1, None)).unwrap();
        store
            .record_call(&call("c2", "notes", 2, Some(ErrorKind::ToolError)))
            .unwrap();
        store
            .record_call(&call("c3", "mail", 3, Some(ErrorKind::ApprovalDenied)))
            .unwrap();
        let ids = |f: CallFilter, n| -> Vec<String> {
            store
                .recent_calls(&f, n)
                .unwrap()
                .into_iter()
                .map(|c| c.call_id)
                .collect()
        };
        assert_eq!(ids(CallFilter::default(), 10), ["c3", "c2", "c1"]);
        assert_eq!(ids(CallFilter::default(), 2), ["c3", "c2"]);
        let of_bot = CallFilter {
            caller: Some("bot-a".into()),
            ..CallFilter::default()
        };
        assert_eq!(ids(of_bot, 10), ["c3"]);
        let notes = CallFilter {
            skill: Some("notes".into()),
            outcome: None,
            caller: None,
        };
        assert_eq!(ids(notes, 10), ["c2", "c1"]);
        let ok = CallFilter {
            skill: None,
            outcome: Some(None),
            caller: None,
        };
        assert_eq!(ids(ok, 10), ["c1"]);
        let denied = CallFilter {
            skill: None,
            outcome: Some(Some(ErrorKind::ApprovalDenied)),
            caller: None,
        };
        assert_eq!(ids(denied, 10), ["c3"]);
    }

    #[test]
    fn all_pins_lists_every_context() {
        let (_dir, store) = open();
        store.pin_skill("c2", "notes", 1).unwrap();
        store.pin_skill("c1", "mail", 1).unwrap();
        let pins = store.all_pins().unwrap();
        assert_eq!(
            pins,
            [
                ContextPin {
                    context_id: "c1".into(),
                    skill: "mail".into()
                },
                ContextPin {
                    context_id: "c2".into(),
                    skill: "notes".into()
                }
            ]
        );
    }
}
