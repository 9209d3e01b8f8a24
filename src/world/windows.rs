//! Faults that last a while instead of one call: an actor's `pause` (a GC
//! pause or a frozen VM: it takes no step, then resumes with its volatile
//! state intact), a latency `spike` on one actor (the delays before its
//! next steps are multiplied), and an `outage` of the artifact store or the
//! broker (every call to it fails or times out until the window ends).

use crate::faults::{FaultKind, Site};
use crate::world::World;
use crate::world::actors::publisher::PublisherPhase;
use crate::world::actors::reconciler::ReconcilerPhase;
use crate::world::engine::ids::{ActorId, ActorKind, OutboxId, TaskId};
use crate::world::engine::life::Life;
use crate::world::engine::schedule::Wake;
use crate::world::engine::step::Verb;

/// What a takeover takes from a paused holder (`World::taken_over`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// A task's lease on its attempt (a worker's or a fence's).
    TaskLease(TaskId),
    /// A message: another worker registers a delivery of it (taking its
    /// inbox row's lease, or finding the row settled).
    Message(OutboxId),
    /// A publisher's claim on an outbox row.
    Claim(OutboxId),
}

/// A component an `outage` can take down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    Store,
    Broker,
}

impl World {
    /// The actor whose own step a wake is, when that actor is up and the
    /// wake is for its current incarnation: what a pause holds back.
    fn actor_of(&self, wake: Wake) -> Option<ActorId> {
        let actor = match wake {
            Wake::Continue { actor, incarnation } => {
                (self.life(actor).incarnation == incarnation).then_some(actor)?
            }
            Wake::Poke(actor) => actor,
            Wake::Call(call) => {
                let call = self.calls.get(call)?;
                let actor = ActorId::new(ActorKind::Api, call.api);
                (self.life(actor).incarnation == call.incarnation).then_some(actor)?
            }
            Wake::ClientTimeout { request, .. } => {
                let outgoing = self.outgoing.get(request)?;
                let actor = ActorId::new(ActorKind::Client, outgoing.client);
                (self.life(actor).incarnation == outgoing.incarnation).then_some(actor)?
            }
            _ => return None,
        };
        self.life(actor).up.then_some(actor)
    }

    /// Before a wake runs: holds it back while its actor is paused, and
    /// draws whether a latency spike or a pause begins now. `Some(step)`
    /// when the wake was held (`step`: a pause was recorded as a step).
    /// `at` is the wake's due time (the model checker may fire it late).
    pub(in crate::world) fn hold_back(&mut self, wake: Wake, at: u64) -> Option<bool> {
        let actor = self.actor_of(wake)?;
        let now = self.now;
        let paused_until = self.life(actor).paused_until;
        if paused_until > now {
            self.requeue(wake, actor, at, paused_until);
            return Some(false);
        }
        let step = self.steps + 1;
        if self.faults.at(Site::Latency, actor, step) == Some(FaultKind::Spike) {
            let length = self.faults.parameter(1, self.longest_wait());
            let factor = self.faults.parameter(4, 40) as u32;
            let life = self.life_mut(actor).expect("an actor of this world");
            life.slow_until = now + length;
            life.slow_factor = factor;
        }
        let kind = self.faults.at(Site::Pause, actor, step)?;
        let until_takeover = kind == FaultKind::UntilTakeover;
        // Half the plain pauses are short (a collection, a hiccup), half
        // long enough to outlive every lease and visibility timeout the
        // actor may hold. A pause until a takeover is long, but ends just
        // after another holder takes over what the actor holds (see
        // `taken_over`): a long pause's end falls anywhere in seconds, and
        // the moment it must hit to show a stale holder's slip, while the
        // new holder's lease is live, lasts a few steps.
        let longest = self.longest_wait();
        let length = if !until_takeover && self.faults.parameter(0, 1) == 0 {
            self.faults.parameter(1, 50)
        } else {
            self.faults.parameter(longest / 2, 2 * longest)
        };
        let until = now + length;
        let life = self.life_mut(actor).expect("an actor of this world");
        life.paused_until = until;
        life.thaw_at_takeover = until_takeover;
        self.begin(actor, Verb::Pause);
        self.rec.fault = Some((Site::Pause, kind));
        self.rec.outcome = "paused";
        self.sometimes("actor-paused");
        if actor.kind == ActorKind::Worker && self.workers[actor.index as usize].job.is_some() {
            // The fencing test: a holder frozen mid-job, whose leases may
            // run out while it sleeps.
            self.sometimes("worker-paused-mid-job");
        }
        self.requeue(wake, actor, at, until);
        self.finish();
        Some(true)
    }

    /// The actor stepping now has just taken `held`: an actor frozen by a
    /// pause until a takeover that holds it thaws a few milliseconds from
    /// now, while the new holder's lease is live, and resumes with what it
    /// had in hand, as a process does whose collector lets go of it just
    /// after another took its place. The taker is never the one thawed: a
    /// paused actor takes no step, so a renewal is never a takeover.
    pub(in crate::world) fn taken_over(&mut self, held: Held) {
        let now = self.now;
        let watching = |life: &Life| life.thaw_at_takeover && life.paused_until > now;
        let mut thawing: Option<ActorId> = None;
        for (index, worker) in self.workers.iter().enumerate() {
            let holds = worker.job.as_ref().is_some_and(|job| match held {
                Held::TaskLease(task) => job.task == task,
                Held::Message(message) => job.delivery.message == message,
                Held::Claim(_) => false,
            });
            if holds && watching(&worker.life) {
                thawing = Some(ActorId::new(ActorKind::Worker, index as u16));
            }
        }
        if let Held::Claim(row) = held {
            for (index, publisher) in self.publishers.iter().enumerate() {
                let holds = !matches!(publisher.phase, PublisherPhase::Idle)
                    && publisher.claimed.contains(&row);
                if holds && watching(&publisher.life) {
                    thawing = Some(ActorId::new(ActorKind::Publisher, index as u16));
                }
            }
        }
        if let (Held::TaskLease(task), ReconcilerPhase::Fence(fence)) =
            (held, &self.reconciler.phase)
            && fence.task == task
            && watching(&self.reconciler.life)
        {
            thawing = Some(ActorId::RECONCILER);
        }
        let Some(actor) = thawing else {
            return;
        };
        let delay = self.faults.parameter(0, 2);
        let at = now + delay;
        let life = self.life_mut(actor).expect("an actor of this world");
        let until = life.paused_until;
        let wake = Wake::Continue {
            actor,
            incarnation: life.incarnation,
        };
        life.paused_until = at;
        life.thaw_at_takeover = false;
        // The busy actor's one step, held back to the pause's end, moves
        // to the thaw. Not found there, it is still queued at its own
        // time, before the pause's end, and `hold_back` sends it to
        // `paused_until`, which is now the thaw.
        if self.queue.remove(until, wake) {
            self.queue.push(at, wake);
        }
        self.sometimes("pause-ended-by-takeover");
    }

    /// The longest lease, visibility or client timeout of this world.
    fn longest_wait(&self) -> u64 {
        let config = &self.config;
        [
            config.task_lease_ms,
            config.inbox_lease_ms,
            config.visibility_timeout_ms,
            config.client_timeout_ms,
            config.publish_lease_ms,
        ]
        .into_iter()
        .max()
        .unwrap_or(1)
        .max(1)
    }

    /// Queues `wake` (due at `due`) again for `at`, when its actor thaws.
    fn requeue(&mut self, wake: Wake, actor: ActorId, due: u64, at: u64) {
        match wake {
            Wake::Poke(_) => {
                if let Some(life) = self.life_mut(actor) {
                    life.poke_at.fired(due);
                }
                self.poke(actor, at);
            }
            other => self.schedule(at, other),
        }
    }

    /// A delay before `actor`'s next step, stretched while a latency spike
    /// is on it.
    pub fn stretched(&self, actor: ActorId, delay: u64) -> u64 {
        let life = self.life(actor);
        if life.slow_until > self.now {
            // A spike is drawn to last at most the longest wait: one that
            // outlasts it is a bug in sim's fault windows.
            assert!(
                life.slow_until - self.now <= self.longest_wait(),
                "a latency spike on {actor} outlasts the longest wait"
            );
            delay.saturating_mul(u64::from(life.slow_factor))
        } else {
            delay
        }
    }

    /// Whether `component` is out now, or goes out at this call (a call
    /// to it is an occurrence of its outage site). The step's record marks
    /// the outage.
    pub fn out_of_service(&mut self, component: Component) -> bool {
        let now = self.now;
        let (site, until) = match component {
            Component::Store => (Site::StoreOutage, self.store_down_until),
            Component::Broker => (Site::BrokerOutage, self.broker_down_until),
        };
        let down = until > now || {
            let fired = self.faults.at(site, self.rec.actor, self.rec.step);
            if fired == Some(FaultKind::Outage) {
                let length = self.outage_length(component);
                match component {
                    Component::Store => self.store_down_until = now + length,
                    Component::Broker => self.broker_down_until = now + length,
                }
                let calls = self.config.store_calls_max * self.config.store_timeout_ms;
                if component == Component::Store && length > calls {
                    // Every call a worker may make in one job fails.
                    self.sometimes("store-outage-outlasts-calls");
                }
                self.sometimes(match component {
                    Component::Store => "store-outage",
                    Component::Broker => "broker-outage",
                });
            }
            fired.is_some()
        };
        if down && self.rec.fault.is_none() {
            self.rec.fault = Some((site, FaultKind::Outage));
        }
        down
    }

    /// How long an outage lasts: long enough, at times, to exhaust a
    /// worker's store calls (`store_calls_max` timeouts) or outlive every
    /// visibility timeout, so the dead-letter and re-drive paths run.
    fn outage_length(&mut self, component: Component) -> u64 {
        let high = match component {
            Component::Store => {
                2 * (self.config.store_calls_max + 1) * self.config.store_timeout_ms.max(1)
            }
            Component::Broker => 2 * self.longest_wait(),
        };
        self.faults.parameter(1, high)
    }

    /// When the broker comes back, if it is out now.
    pub fn broker_down(&self) -> Option<u64> {
        (self.broker_down_until > self.now).then_some(self.broker_down_until)
    }
}
