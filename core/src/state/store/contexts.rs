//! The `contexts` and `route_events` tables: skills pinned per context id (read at every
//! request, so a pin from the CLI takes effect at once in the running core), and one row
//! per transition of an executed activation plan.

use rusqlite::{params, Connection, TransactionBehavior};
use serde::Serialize;

use super::{Store, StoreError};

/// A skill pinned in a context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pin {
    /// The skill.
    pub skill: String,
    /// When it was pinned, Unix milliseconds.
    pub pinned_at: i64,
}

/// One transition of an executed activation plan, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouteEvent {
    /// The route it belongs to.
    pub route_id: String,
    /// Its position in the run, from 0.
    pub seq: u32,
    /// State left (`from` on the wire, as `POST /v1/route/execute` spells it).
    #[serde(rename = "from")]
    pub from_state: String,
    /// State entered (`to` on the wire).
    #[serde(rename = "to")]
    pub to_state: String,
    /// The skill concerned.
    pub skill: Option<String>,
    /// The tool concerned.
    pub tool: Option<String>,
    /// Why, in words.
    pub reason: String,
    /// When, Unix milliseconds.
    pub at: i64,
}

impl Store {
    /// Pins `skill` in `context_id`; pinning it again keeps the first time. Returns whether
    /// it was newly pinned.
    pub fn pin_skill(&self, context_id: &str, skill: &str, at: i64) -> Result<bool, StoreError> {
        self.conn()
            .execute(
                "INSERT INTO contexts (context_id, skill, pinned_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (context_id, skill) DO NOTHING",
                params![context_id, skill, at],
            )
            .map(|n| n > 0)
            .map_err(|source| StoreError::WritePins {
                context_id: context_id.to_owned(),
                source,
            })
    }

    /// Unpins `skill` from `context_id`. Returns whether it was pinned.
    pub fn unpin_skill(&self, context_id: &str, skill: &str) -> Result<bool, StoreError> {
        self.conn()
            .execute(
                "DELETE FROM contexts WHERE context_id = ?1 AND skill = ?2",
                params![context_id, skill],
            )
            .map(|n| n > 0)
            .map_err(|source| StoreError::WritePins {
                context_id: context_id.to_owned(),
                source,
            })
    }

    /// The skills pinned in `context_id`, oldest pin first.
    pub fn pinned_skills(&self, context_id: &str) -> Result<Vec<Pin>, StoreError> {
        pinned_skills(&self.conn(), context_id)
    }

    /// Records the transitions of one run, all or none.
    pub fn record_route_events(&self, events: &[RouteEvent]) -> Result<(), StoreError> {
        let Some(first) = events.first() else {
            return Ok(());
        };
        let mut conn = self.conn();
        let mut write = || -> rusqlite::Result<()> {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            {
                let mut stmt = tx.prepare_cached(
                    "INSERT INTO route_events \
                     (route_id, seq, from_state, to_state, skill, tool, reason, at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )?;
                for e in events {
                    stmt.execute(params![
                        e.route_id,
                        e.seq,
                        e.from_state,
                        e.to_state,
                        e.skill,
                        e.tool,
                        e.reason,
                        e.at
                    ])?;
                }
            }
            tx.commit()
        };
        write().map_err(|source| StoreError::RecordRouteEvents {
            route_id: first.route_id.clone(),
            source,
        })
    }

    /// The recorded transitions of a route, in order.
    pub fn route_events(&self, route_id: &str) -> Result<Vec<RouteEvent>, StoreError> {
        let conn = self.conn();
        let read = || -> rusqlite::Result<Vec<RouteEvent>> {
            let mut stmt = conn.prepare_cached(
                "SELECT route_id, seq, from_state, to_state, skill, tool, reason, at \
                 FROM route_events WHERE route_id = ?1 ORDER BY seq",
            )?;
            let rows = stmt.query_map([route_id], |row| {
                Ok(RouteEvent {
                    route_id: row.get(0)?,
                    seq: row.get(1)?,
                    from_state: row.get(2)?,
                    to_state: row.get(3)?,
                    skill: row.get(4)?,
                    tool: row.get(5)?,
                    reason: row.get(6)?,
                    at: row.get(7)?,
                })
            })?;
            rows.collect()
        };
        read().map_err(|source| StoreError::ReadRouteEvents {
            route_id: route_id.to_owned(),
            source,
        })
    }
}

/// The skills pinned in `context_id`, oldest first.
pub(super) fn pinned_skills(conn: &Connection, context_id: &str) -> Result<Vec<Pin>, StoreError> {
    let read = || -> rusqlite::Result<Vec<Pin>> {
        let mut stmt = conn.prepare_cached(
            "SELECT skill, pinned_at FROM contexts WHERE context_id = ?1 \
             ORDER BY pinned_at, skill",
        )?;
        let rows = stmt.query_map([context_id], |row| {
            Ok(Pin {
                skill: row.get(0)?,
                pinned_at: row.get(1)?,
            })
        })?;
        rows.collect()
    };
    read().map_err(|source| StoreError::ReadPins {
        context_id: context_id.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_survive_store_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = Store::db_path(dir.path());
        {
            let store = Store::open(&path).unwrap();
            assert!(store.pin_skill("chat-1", "notes", 10).unwrap());
            assert!(store.pin_skill("chat-1", "mail", 20).unwrap());
            assert!(!store.pin_skill("chat-1", "notes", 30).unwrap());
            assert!(store.pin_skill("chat-2", "mail", 5).unwrap());
        }
        let store = Store::open(&path).unwrap();
        let pins = store.pinned_skills("chat-1").unwrap();
        assert_eq!(
            pins,
            [
                Pin {
                    skill: "notes".into(),
                    pinned_at: 10
                },
                Pin {
                    skill: "mail".into(),
                    pinned_at: 20
                }
            ]
        );
        assert!(store.unpin_skill("chat-1", "notes").unwrap());
        assert!(!store.unpin_skill("chat-1", "notes").unwrap());
        drop(store);
        let store = Store::open(&path).unwrap();
        let names: Vec<_> = store
            .pinned_skills("chat-1")
            .unwrap()
            .into_iter()
            .map(|p| p.skill)
            .collect();
        assert_eq!(names, ["mail"]);
        assert_eq!(store.pinned_skills("chat-2").unwrap().len(), 1);
        assert!(store.pinned_skills("nobody").unwrap().is_empty());
    }

    #[test]
    fn route_events_round_trip_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&Store::db_path(dir.path())).unwrap();
        let event = |seq: u32, to: &str| RouteEvent {
            route_id: "rt_1".into(),
            seq,
            from_state: "running".into(),
            to_state: to.into(),
            skill: Some("notes".into()),
            tool: None,
            reason: "r".into(),
            at: 1,
        };
        store
            .record_route_events(&[event(0, "running"), event(1, "success")])
            .unwrap();
        let read = store.route_events("rt_1").unwrap();
        assert_eq!(read.len(), 2);
        assert_eq!(read[1].to_state, "success");
        // A repeated run id writes nothing.
        assert!(store.record_route_events(&[event(1, "exit")]).is_err());
        assert_eq!(store.route_events("rt_1").unwrap()[1].to_state, "success");
    }
}
