//! The worker's step dispatch: take a delivery, run the step its phase
//! names, settle what comes next; and what the phases share (leases, the
//! expected artifact).

use crate::hash::Sha;
use crate::mutants::Mutant;
use crate::world::World;
use crate::world::engine::ids::{ActorId, ActorKind, TaskId};
use crate::world::engine::step::Verb;
use crate::world::stores::db::{EffectKind, Lease, Payload, Token};
use crate::world::stores::store::Version;
use crate::world::windows::Held;

use super::*;

impl World {
    /// The artifact a task's transform produces (computed once per task).
    pub fn expected_artifact(&mut self, task: TaskId) -> (Sha, u64) {
        if let Some(artifact) = self.db.task(task).artifact {
            return artifact;
        }
        let artifact = artifact_for(task, &self.db.task(task).input.canonical);
        self.db.task_mut(task).artifact = Some(artifact);
        artifact
    }

    /// Read-back verification: task id, attempt, size and SHA-256 of both
    /// the bytes and the metadata. Marks `artifact-metadata-mismatch`
    /// when only the metadata is wrong, `artifact-bytes-mismatch` when the
    /// bytes are: each fault that damages an artifact shows its mark.
    pub fn artifact_is_good(
        &mut self,
        task: TaskId,
        attempt: u32,
        expected: Option<Sha>,
        version: &Version,
    ) -> bool {
        let (sha, size) = self.expected_artifact(task);
        let Some(expected) = expected else {
            return false;
        };
        let good = expected == sha && *version == Version::plain(task, attempt, sha, size);
        if !good && version.bytes_sha256 == sha && version.size == size {
            // The bytes are right and only what they claim to be is not:
            // what a damaged metadata write leaves.
            self.sometimes("artifact-metadata-mismatch");
        } else if version.bytes_sha256 != sha {
            // Bytes other than the input's transform: what a corrupt put
            // (or a stale attempt's artifact) leaves.
            self.sometimes("artifact-bytes-mismatch");
        }
        good
    }

    pub(super) fn worker_actor(index: usize) -> ActorId {
        ActorId::new(ActorKind::Worker, index as u16)
    }

    pub(in crate::world) fn worker_step(&mut self, index: usize, poked: bool) -> bool {
        if self.workers[index].phase == WorkerPhase::Idle {
            return poked && self.worker_take(index);
        }
        if poked {
            return false;
        }
        let actor = World::worker_actor(index);
        let phase = self.workers[index].phase.clone();
        let mut job = self.workers[index]
            .job
            .take()
            .expect("a busy worker has a job");
        self.begin(actor, verb_of(&phase, &job));
        self.rec.task = Some(job.task);
        self.rec.message = Some(job.delivery.message);
        self.rec.entry = Some(job.delivery.entry);
        self.rec.attempt = job.attempt;
        let next = match phase {
            WorkerPhase::Idle => unreachable!("handled above"),
            WorkerPhase::Register => {
                self.touch_delivery(&job, DeliveryAct::Register);
                self.worker_register(&mut job)
            }
            WorkerPhase::Start => self.worker_start(&mut job),
            WorkerPhase::Plan => self.worker_plan(&mut job),
            WorkerPhase::Put => self.worker_put(&mut job),
            WorkerPhase::RecordUnknown => self.worker_record_unknown(&mut job),
            WorkerPhase::ReadBack => self.worker_read_back(&mut job),
            WorkerPhase::Verify { good } => self.worker_verify(&mut job, good),
            WorkerPhase::Recheck => self.worker_recheck(&mut job),
            WorkerPhase::Reload => self.worker_reload(&mut job),
            WorkerPhase::Complete => self.worker_complete(&mut job),
            WorkerPhase::Ack => self.worker_ack(&mut job),
            WorkerPhase::Nack(code) => self.worker_nack(&mut job, code),
            WorkerPhase::Quarantine => self.worker_quarantine(&mut job),
            WorkerPhase::FailPoison(code) => self.worker_fail_poison(&mut job, code),
            WorkerPhase::DeadLetter(code) | WorkerPhase::PayDeadLetter(code) => {
                self.worker_dead_letter(&mut job, code)
            }
            WorkerPhase::Compensate => self.worker_compensate(&mut job),
            WorkerPhase::CheckHidden => self.worker_check_hidden(&mut job),
            WorkerPhase::Fail => self.worker_fail(&mut job),
            WorkerPhase::Fence => self.worker_fence(&mut job),
        };
        self.settle(index, job, next);
        true
    }

    /// After a step: record it, then go on to the next phase or fall idle.
    pub(super) fn settle(&mut self, index: usize, job: Box<Job>, next: Step) {
        let crashed = self.crash_now.is_some();
        match next {
            Step::Next(phase, delay) if !crashed => {
                if phase_processes(&phase) {
                    self.touch_delivery(&job, DeliveryAct::Work);
                }
                self.workers[index].phase = phase;
                self.workers[index].job = Some(job);
                self.finish();
                if self.workers[index].life.up {
                    self.continue_after(World::worker_actor(index), delay);
                }
            }
            Step::Next(..) | Step::Done => {
                let act = if crashed {
                    DeliveryAct::Drop
                } else {
                    DeliveryAct::End
                };
                self.touch_delivery(&job, act);
                self.workers[index].phase = WorkerPhase::Idle;
                self.finish();
                self.worker_idle(index);
            }
        }
    }

    pub(super) fn touch_delivery(&mut self, job: &Job, act: DeliveryAct) {
        self.touched.deliveries.push(DeliveryTouch {
            delivery: job.delivery_id,
            message: job.delivery.message,
            payload_sha256: job.delivery.payload_sha256,
            act,
        });
    }

    /// A worker fell idle: take what is in its mailbox, or ask the broker.
    pub(super) fn worker_idle(&mut self, index: usize) {
        let worker = &self.workers[index];
        if !worker.life.up {
            return;
        }
        match worker.mailbox.iter().map(|(arrival, _, _)| *arrival).min() {
            Some(arrival) => {
                let at = arrival.max(self.now);
                self.poke(World::worker_actor(index), at);
            }
            None => self.poke_broker(self.now),
        }
    }

    /// Takes the next arrived delivery and registers it: the first step of
    /// processing is the inbox transaction.
    pub(super) fn worker_take(&mut self, index: usize) -> bool {
        let now = self.now;
        let worker = &mut self.workers[index];
        let Some(position) = worker
            .mailbox
            .iter()
            .enumerate()
            .filter(|(_, (arrival, _, _))| *arrival <= now)
            .min_by_key(|(_, (arrival, id, _))| (*arrival, *id))
            .map(|(position, _)| position)
        else {
            self.worker_idle(index);
            return false;
        };
        let (_, delivery_id, delivery) = worker.mailbox.remove(position);
        let Payload::Work { task, attempt, .. } = delivery.payload else {
            unreachable!("workers only consume task-work");
        };
        let mut job = Box::new(Job {
            delivery_id,
            task,
            attempt,
            version: 0,
            token: Token {
                task,
                attempt,
                kind: EffectKind::Artifact,
                generation: 0,
            },
            puts: 0,
            reads: 0,
            hides: 0,
            hide_answered: false,
            result: None,
            fence: None,
            delivery,
        });
        let actor = World::worker_actor(index);
        if self.mutant == Some(Mutant::AckBeforeProcess) {
            self.ack_on_receipt(index, job);
            return true;
        }
        self.begin(actor, Verb::Register);
        self.rec.task = Some(task);
        self.rec.message = Some(job.delivery.message);
        self.rec.entry = Some(job.delivery.entry);
        self.rec.attempt = attempt;
        self.rec.hash = Some(job.delivery.payload_sha256);
        self.touch_delivery(&job, DeliveryAct::Register);
        let next = self.worker_register(&mut job);
        self.settle(index, job, next);
        true
    }

    /// The worker taking this step, and its incarnation: who holds what
    /// it leases.
    pub(super) fn worker_holder(&self) -> (ActorId, u32) {
        let actor = self.rec.actor;
        (actor, self.workers[actor.index as usize].life.incarnation)
    }

    /// Whether this worker still holds the attempt's lease; renews it.
    pub(super) fn holds_lease(&mut self, job: &Job) -> bool {
        let (actor, incarnation) = self.worker_holder();
        let lease = self.db.task(job.task).lease;
        let mine = lease.is_some_and(|l| {
            (l.holder, l.incarnation, l.attempt) == (actor, incarnation, job.attempt)
                && l.until_ms >= self.now
        });
        if mine {
            self.lease_attempt(job);
            self.renew_inbox(job);
        }
        mine
    }

    /// Whether another holder (or another incarnation of this worker) has
    /// the task's lease, live: an attempt-ending commit is not made then. A
    /// worker that paused past its lease leaves the attempt to whoever took
    /// it over; one whose lease merely ran out, untaken, may still finish.
    pub(super) fn lease_held_elsewhere(&self, job: &Job) -> bool {
        let (actor, incarnation) = self.worker_holder();
        let lease = self.db.task(job.task).lease;
        lease.is_some_and(|l| l.held_by_other(self.now, actor, incarnation))
    }

    /// The attempt's lease, held by this worker's incarnation.
    pub(super) fn lease_attempt(&mut self, job: &Job) {
        let (holder, incarnation) = self.worker_holder();
        self.grant_lease(job.task, job.attempt, holder, incarnation);
    }

    /// Gives `attempt` of `task` to `holder`'s incarnation for
    /// `task_lease_ms` from now (a worker's attempt, or a fence's claim).
    pub(in crate::world) fn grant_lease(
        &mut self,
        task: TaskId,
        attempt: u32,
        holder: ActorId,
        incarnation: u32,
    ) {
        let lease = Lease {
            attempt,
            holder,
            incarnation,
            until_ms: self.now + self.config.task_lease_ms,
        };
        let replaced = self.db.task(task).lease;
        self.touched.leases.push((task, replaced));
        self.db.set_lease(task, Some(lease));
        self.taken_over(Held::TaskLease(task));
    }

    /// Drops `task`'s lease (its attempt ended, or a human owns it now),
    /// listing the lease it replaced for the lease checks.
    pub(in crate::world) fn drop_lease(&mut self, task: TaskId) {
        let replaced = self.db.task(task).lease;
        self.touched.leases.push((task, replaced));
        self.db.set_lease(task, None);
    }

    /// Let the delivery go: the lease moved on or a fence claimed the effect.
    pub(super) fn let_go(&mut self, job: &Job, why: &'static str) -> Step {
        self.rec.outcome = why;
        let (actor, incarnation) = self.worker_holder();
        self.touched.let_go.push(crate::world::LetGo {
            task: job.task,
            attempt: job.attempt,
            token: job.token,
            actor,
            incarnation,
            why,
        });
        self.race("reconciler × worker");
        self.touch_delivery(job, DeliveryAct::Drop);
        Step::Done
    }
}

impl Job {
    pub(super) fn version_now(&self, world: &World) -> i64 {
        world.db.task(self.task).state.version
    }
}
