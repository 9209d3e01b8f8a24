//! A client's steps: send a request, wait, retry with the same key, give up.

use crate::mutants::Mutant;
use crate::world::World;
use crate::world::actors::api::{ApiPhase, Call, Response};
use crate::world::engine::ids::{ActorId, ActorKind, CallId, RequestId};
use crate::world::engine::schedule::Wake;
use crate::world::engine::step::Verb;
use crate::world::input::{Request, RequestKind};
use crate::world::stores::db::Answer;

use super::*;

impl World {
    /// Issues a scripted or generated request now; it joins the log of
    /// issued requests that reproducers replay.
    pub(in crate::world) fn issue(&mut self, mut request: Request) -> bool {
        request.at_ms = self.now;
        if self.keep_request_log {
            self.requests.push(request.clone());
        }
        if !request.kind.from_client() {
            if let Some(answers) = &mut self.answers {
                answers.issued(&request, self.now, None, false);
            }
            // Ground truth, taken when the operator asks, not when its
            // step runs: a replay of a dead letter that exists is owed a
            // task (judged by `converges`), whatever the replay then does.
            if let RequestKind::ReplayDeadLetter { dead_letter } = &request.kind
                && self.workload_on
                && let Some(id) = self.find_dead_letter(dead_letter)
            {
                self.replays_owed.push(id);
            }
            return self.operator_step(&request.kind);
        }
        let client = request.client.min(self.clients.len() as u16 - 1);
        let life = self.clients[client as usize];
        if !life.up || !self.workload_on {
            // A request whose client is down is dropped, as a real
            // client's would be; `sim run` warns about each one.
            if let Some(answers) = &mut self.answers
                && self.workload_on
            {
                answers.issued(&request, self.now, None, true);
            }
            return false;
        }
        self.next_request += 1;
        let id = RequestId(self.next_request);
        if let Some(answers) = &mut self.answers {
            answers.issued(&request, self.now, Some(id.0), false);
        }
        let (op, intent) = match request.kind {
            RequestKind::Create { key, input } => {
                let fingerprint = input.fingerprint;
                let intent = self.intent_for(&key, fingerprint, input.valid, false);
                (
                    ClientOp::Create {
                        key,
                        input,
                        fingerprint,
                    },
                    Some(intent),
                )
            }
            RequestKind::Cancel { target } => (ClientOp::Cancel { target }, None),
            RequestKind::ReadStatus { target } => (ClientOp::Read { target }, None),
            _ => unreachable!("operator requests are handled above"),
        };
        let apis = self.apis.len() as u16;
        let first_api = request
            .api
            .map_or(id.0 as u16 % apis, |api| api.min(apis - 1));
        self.outgoing.insert(
            id,
            Outgoing {
                client,
                op: std::sync::Arc::new(op),
                intent,
                sends: 0,
                next_api: first_api,
                incarnation: life.incarnation,
            },
        );
        self.carry_intent(intent);
        self.begin(ActorId::new(ActorKind::Client, client), Verb::Send);
        self.send(id);
        self.finish();
        true
    }

    /// Hands one send of a request to an API and starts waiting.
    fn send(&mut self, id: RequestId) {
        let apis = self.apis.len() as u16;
        let outgoing = self.outgoing.get_mut(id).expect("a pending request");
        // A client's pending requests die with its incarnation: only the
        // incarnation that made a request, up, ever sends it.
        let life = self.clients[outgoing.client as usize];
        assert!(
            life.up && life.incarnation == outgoing.incarnation,
            "{id} of client-{} incarnation {} sent by incarnation {} (up: {})",
            outgoing.client + 1,
            outgoing.incarnation,
            life.incarnation,
            life.up
        );
        outgoing.sends += 1;
        self.touched.client_sends.push((id, false));
        let api = outgoing.next_api % apis;
        outgoing.next_api = (api + 1) % apis;
        let send = outgoing.sends;
        let outcome = match *outgoing.op {
            ClientOp::Create { .. } => "create",
            ClientOp::Cancel { .. } => "cancel",
            ClientOp::Read { .. } => "read-status",
        };
        self.rec.outcome = outcome;
        let (op, intent) = (std::sync::Arc::clone(&outgoing.op), outgoing.intent);
        let call_id = self.next_call_id();
        let incarnation = self.apis[api as usize].incarnation;
        self.carry_intent(intent);
        self.calls.insert(
            call_id,
            Call {
                request: id,
                op,
                intent,
                api,
                incarnation,
                phase: ApiPhase::Arrive,
            },
        );
        let arrive = self.now + self.latency();
        self.schedule(arrive, Wake::Call(call_id));
        let timeout = self.now + self.config.client_timeout_ms;
        self.schedule(timeout, Wake::ClientTimeout { request: id, send });
    }

    pub(in crate::world) fn client_timeout(&mut self, id: RequestId, send: u32) -> bool {
        // Answered, given up, or gone with its client's incarnation.
        let Some(outgoing) = self.outgoing.get(id) else {
            return false;
        };
        let client = outgoing.client;
        let life = self.clients[client as usize];
        if outgoing.sends != send || !life.up || life.incarnation != outgoing.incarnation {
            if life.incarnation != outgoing.incarnation {
                if let Some(answers) = &mut self.answers {
                    answers.ended(id.0, outgoing.sends, self.now, "lost-with-client");
                }
                self.end_request(id);
            }
            return false;
        }
        let actor = ActorId::new(ActorKind::Client, client);
        if outgoing.sends >= self.config.client_attempts_max as u32 {
            if let Some(answers) = &mut self.answers {
                answers.ended(id.0, outgoing.sends, self.now, "gave-up");
            }
            self.begin(actor, Verb::GiveUp);
            // The checker judges the give-up by its own count of the
            // request's sends, and forgets the count itself.
            self.touched.client_sends.push((id, true));
            self.drop_request(id);
            self.rec.outcome = "gave-up";
            self.finish();
            return true;
        }
        self.begin(actor, Verb::Retry);
        if self.mutant == Some(Mutant::ClientNewKeyOnRetry)
            && let Some(ClientOp::Create { key, .. }) = self
                .outgoing
                .get_mut(id)
                .map(|o| std::sync::Arc::make_mut(&mut o.op))
        {
            *key = format!("{key}-r{send}").into();
        }
        self.send(id);
        self.finish();
        true
    }

    /// A response reaches its client (inside the API's respond step): the
    /// request is done. A reader keeps the higher version it has seen.
    pub(in crate::world) fn deliver_response(&mut self, id: RequestId, response: Response) {
        let Some(outgoing) = self.outgoing.get(id) else {
            return;
        };
        let life = self.clients[outgoing.client as usize];
        if !life.up || life.incarnation != outgoing.incarnation {
            return;
        }
        let client = outgoing.client;
        if let Response::Status(Some((task, _, version))) = &response {
            let seen = self.highest_seen.entry((*task, client)).or_insert(*version);
            if *version < *seen {
                // An older view than one already read: the reader keeps the
                // newer one.
                self.rec.outcome = "older-than-seen";
            }
            *seen = (*seen).max(*version);
        }
        if let Some(answers) = &mut self.answers {
            answers.answered(id.0, outgoing.sends, self.now, &response);
        }
        // What clients hear, by kind: a campaign in which no client ever
        // hears one of these has lost a path from the API back to them.
        self.sometimes(match &response {
            Response::Create(Answer::Accepted(_)) => "client-heard-accepted",
            Response::Create(Answer::Refused(_)) => "client-heard-refused",
            Response::Cancel(Ok(_)) => "client-heard-cancel-recorded",
            Response::Cancel(Err(_)) => "client-heard-cancel-refused",
            Response::Status(Some(_)) => "client-heard-status",
            Response::Status(None) => "client-heard-not-found",
        });
        self.end_request(id);
    }

    /// The client is done with request `id`: answered, or gone with its
    /// incarnation. The checker forgets its count of the request's sends.
    fn end_request(&mut self, id: RequestId) {
        self.checker.forget_request(id);
        self.drop_request(id);
    }

    /// Drops a pending request and releases its intent. A give-up calls
    /// this alone: the check that judges it reads the send count and
    /// forgets it there.
    fn drop_request(&mut self, id: RequestId) {
        if let Some(outgoing) = self.outgoing.remove(id) {
            self.release_intent(outgoing.intent);
        }
    }

    fn next_call_id(&mut self) -> CallId {
        self.next_call += 1;
        CallId(self.next_call)
    }
}
