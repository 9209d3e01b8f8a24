//! What each client request got back, for the dump's `requests` key: kept
//! only when asked for (`sim run` asks; fuzz does not, its hot path stays
//! as it was), so a scenario can expect "three identical responses".

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::world::actors::api::Response;
use crate::world::input::{Request, RequestKind, Target};
use crate::world::stores::db::Answer;

/// Every request issued, in order, and what became of it.
#[derive(Clone, Debug, Default, Hash)]
pub struct Answers {
    /// One JSON object per issued request, in issue order.
    pub list: Vec<Value>,
    /// A client request's id (`RequestId`) → its place in `list`.
    by_request: BTreeMap<u32, usize>,
}

impl Answers {
    /// A request was issued at `at_ms`; `id` is its client request id, or
    /// `None` for an operator action or a request its client, down, dropped.
    pub fn issued(&mut self, request: &Request, at_ms: u64, id: Option<u32>, client_down: bool) {
        let mut entry = json!({
            "kind": request.kind.name(),
            "issuedMs": at_ms,
        });
        if request.kind.from_client() {
            entry["client"] = format!("client-{}", request.client + 1).into();
            entry["sends"] = 0.into();
            entry["status"] = if client_down {
                "dropped-client-down"
            } else {
                "pending"
            }
            .into();
        } else {
            entry["status"] = "operator".into();
        }
        match &request.kind {
            RequestKind::Create { key, .. } => entry["key"] = key.to_string().into(),
            RequestKind::Cancel { target } | RequestKind::ReadStatus { target } => match target {
                Target::Key(key) => entry["key"] = key.to_string().into(),
                Target::Task(task) => entry["task"] = task.to_string().into(),
            },
            _ => {}
        }
        if let Some(id) = id {
            self.by_request.insert(id, self.list.len());
        }
        self.list.push(entry);
    }

    /// The request's answer reached its client after `sends` sends.
    pub fn answered(&mut self, id: u32, sends: u32, at_ms: u64, response: &Response) {
        let answer = match response {
            Response::Create(Answer::Accepted(task)) => {
                json!({"accepted": true, "task": task.to_string()})
            }
            Response::Create(Answer::Refused(code)) => json!({"accepted": false, "code": code}),
            Response::Cancel(Ok(version)) => json!({"accepted": true, "version": version}),
            Response::Cancel(Err(code)) => json!({"accepted": false, "code": code}),
            Response::Status(Some((task, status, version))) => json!({
                "found": true,
                "task": task.to_string(),
                "status": status.as_str(),
                "version": version,
            }),
            Response::Status(None) => json!({"found": false}),
        };
        self.end(id, sends, at_ms, "answered", Some(answer));
    }

    /// The client stopped waiting: it gave up, or it crashed.
    pub fn ended(&mut self, id: u32, sends: u32, at_ms: u64, status: &'static str) {
        self.end(id, sends, at_ms, status, None);
    }

    fn end(&mut self, id: u32, sends: u32, at_ms: u64, status: &str, answer: Option<Value>) {
        let Some(entry) = self
            .by_request
            .remove(&id)
            .and_then(|at| self.list.get_mut(at))
        else {
            return;
        };
        entry["status"] = status.into();
        entry["sends"] = sends.into();
        entry["endedMs"] = at_ms.into();
        if let Some(answer) = answer {
            entry["answer"] = answer;
        }
    }

    /// Requests dropped because their client was down: (index, entry).
    pub fn dropped(&self) -> Vec<(usize, &Value)> {
        self.list
            .iter()
            .enumerate()
            .filter(|(_, entry)| entry["status"] == "dropped-client-down")
            .collect()
    }
}
