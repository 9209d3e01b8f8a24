//! Every invariant of DESIGN §6 fires: each test builds a real world by
//! running a scenario, checks that the honest state passes, breaks the state
//! by hand in the smallest way that violates exactly that invariant, and
//! asserts `World::check_as_touched` names it (`converges` is judged by
//! `World::convergence_failures` on a drained world). The last test fails
//! when an invariant is added without a `fires_*` test here.

use std::sync::Arc;

use crate::common::load_scenario;

use sim::invariants::INVARIANTS;
use sim::run::{execute, world_for};
use sim::scenario::Scenario;
use sim::task::json::event_payload_sha256;
use sim::task::{EventBody, EventType, Policy, Status, TaskEvent, Text, initial_state};
use sim::world::actors::publisher::PublisherPhase;
use sim::world::actors::worker::{DeliveryAct, DeliveryTouch};
use sim::world::engine::ids::{ActorId, ActorKind, EntryId, IntentId, OutboxId, SignalId, TaskId};
use sim::world::engine::step::Verb;
use sim::world::stores::broker::EntryState;
use sim::world::stores::cache::CacheEntry;
use sim::world::stores::db::{
    Answer, EffectKind, EffectState, IdempotencyRecord, InboxLease, InboxRow, Input, Lease,
    LedgerRow, OutboxRow, Payload, RecordState, Rejection, ReviewReason, TaskRow, Token, Topic,
};
use sim::world::stores::store::{Object, corrupt_bytes};
use sim::world::{ClaimWrite, Commit, Stepped, Touched, World};

const TASK: TaskId = TaskId(1);

/// The happy path, with a few config lines added.
fn happy_path_with(config: &str) -> Scenario {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/happy-path.toml");
    let text = std::fs::read_to_string(path).expect("scenarios/happy-path.toml is readable");
    assert!(
        text.contains("[config]\n"),
        "happy-path.toml has a [config] table"
    );
    let text = text.replacen("[config]\n", &format!("[config]\n{config}"), 1);
    sim::scenario::parse::parse(&text, None).unwrap_or_else(|error| panic!("{error}"))
}

/// Runs a scenario to the end; it must converge with no violation.
fn drained(scenario: &Scenario) -> World {
    let finished = execute(scenario, world_for(scenario), |_, _| {});
    assert!(
        finished.outcome.converged(),
        "the scenario must run clean: {:?} {:?}",
        finished.outcome.violation,
        finished.outcome.not_converged
    );
    finished.world
}

/// `scenarios/happy-path.toml`, drained: task-1 completed at v2 with one
/// visible artifact, every outbox row published, nothing in the broker.
fn happy() -> World {
    let world = drained(&happy_path_with(""));
    assert_eq!(world.db.task(TASK).state.status, Status::Completed);
    assert_eq!(world.db.task(TASK).state.version, 2);
    world
}

/// Checks as if a step had touched `touched`; the violated invariant's id.
fn fired(world: &mut World, touched: Touched) -> Option<&'static str> {
    world.check_as_touched(touched).map(|violation| {
        assert!(!violation.message.is_empty());
        violation.invariant
    })
}

fn clean(world: &mut World, touched: Touched) {
    let violation = world.check_as_touched(touched);
    assert_eq!(violation, None, "the unbroken world passes");
}

fn fires(world: &mut World, touched: Touched, id: &str) {
    assert!(sim::invariants::is_invariant(id), "{id} is an invariant");
    assert_eq!(fired(world, touched), Some(id));
}

/// A step that answered `intent` with `answer` at `at`.
fn answered(intent: IntentId, answer: Answer, at: u64) -> Touched {
    Touched {
        answers: vec![(intent, answer, at)],
        ..Touched::default()
    }
}

/// The last virtual time at which a retry of `intent` must still get
/// its first answer (the record's deadline, less one).
fn last_ms_bound(world: &World, intent: IntentId) -> u64 {
    let first = world.intents.get(intent).expect("the intent is live").first;
    first.expect("the intent was answered").deadline_ms - 1
}

/// A step that committed `kind` for task-1's attempt 1 as `actor`.
fn committed_by(kind: EventType, actor: ActorId) -> Touched {
    Touched {
        commits: vec![sim::world::Commit {
            task: TASK,
            kind,
            attempt: 1,
            actor,
            incarnation: 0,
            lease: None,
        }],
        ..Touched::default()
    }
}

/// Whether task-1 is running.
fn task_running(world: &World) -> bool {
    world
        .db
        .find_task(TASK)
        .is_some_and(|row| row.state.status == Status::Running)
}

fn tasks(tasks: &[TaskId]) -> Touched {
    Touched {
        tasks: tasks.to_vec(),
        ..Touched::default()
    }
}

/// The artifact task-1 completed with.
fn artifact_token() -> Token {
    Token {
        task: TASK,
        attempt: 1,
        kind: EffectKind::Artifact,
        generation: 0,
    }
}

/// The store object of task-1's artifact.
fn the_artifact(world: &mut World) -> &mut Object {
    world.store.get_mut(artifact_token()).expect("the artifact")
}

/// Inserts the task row of an accepted create under `key`, with task-1's
/// input and fingerprint, created now (no record, no outbox row).
fn insert_task(world: &mut World, key: &str) -> TaskId {
    let id = world.db.next_task_id();
    let first = world.db.task(TASK);
    let row = TaskRow {
        id,
        state: initial_state(Text::from(id.to_string())),
        key: Text::from(key),
        // The input's own fingerprint: task-1 may be compacted, holding a
        // placeholder where its input was.
        fingerprint: first.input.fingerprint,
        input: Arc::clone(&first.input),
        input_sha256: first.input_sha256,
        replay_of: None,
        created_ms: world.now,
        events: Vec::new(),
        snapshots: Vec::new(),
        effects: Vec::new(),
        lease: None,
        outbox_rows: Vec::new(),
        redrives: 0,
        event_redrives: 0,
        artifact: None,
        compacted: false,
        retention_parked: false,
    };
    world.db.tasks.push(row);
    id
}

/// An idempotency record for `key` naming `task`, committed now.
fn record(world: &mut World, key: &str, task: TaskId) {
    let fingerprint = world.db.task(task).fingerprint;
    world.db.put_record(IdempotencyRecord {
        key: Text::from(key),
        fingerprint,
        state: RecordState::Succeeded,
        answer: Answer::Accepted(task),
        committed_ms: world.now,
        kept_since_ms: None,
    });
}

/// The happy path stepped until task-1 completed: its key's record lives.
fn completed_with_live_record() -> World {
    let world = stepped_until(&happy_path_with(""), |world| {
        world
            .db
            .find_task(TASK)
            .is_some_and(|row| row.state.status == Status::Completed)
    });
    assert!(world.db.record(&first_key(&world)).is_some());
    world
}

fn first_key(world: &World) -> Text {
    world.db.task(TASK).key.clone()
}

#[test]
fn fires_one_task_per_intent() {
    let mut world = happy();
    let intent = IntentId(1);
    let first = world
        .intents
        .get(intent)
        .expect("the intent is live")
        .first
        .expect("the intent was answered");
    assert_eq!(first.answer, Answer::Accepted(TASK));
    let at = first.deadline_ms - 1;
    // A quota of one, spent: QUOTA_EXCEEDED is then an answer the quota
    // allows (`quota-exact`), and only the intent's first answer judges it.
    world.db.quota_total = 1;
    world.db.quota_remaining = 0;
    // A retry before the deadline answered with the first answer is fine.
    clean(&mut world, answered(intent, Answer::Accepted(TASK), at));
    // The same intent answered differently while its record lives.
    fires(
        &mut world,
        answered(intent, Answer::Refused("QUOTA_EXCEEDED"), at),
        "one-task-per-intent",
    );
    // After the deadline a different answer is a new intent's business.
    clean(
        &mut world,
        answered(intent, Answer::Refused("QUOTA_EXCEEDED"), first.deadline_ms),
    );
}

#[test]
fn fires_malformed_create_refused() {
    let mut world = happy();
    let intent = IntentId(1);
    let at = last_ms_bound(&world, intent);
    // The happy path's key is well formed: refusing it as malformed breaks
    // the rule, either way.
    for code in ["INVALID_IDEMPOTENCY_KEY", "INVALID_INPUT"] {
        fires(
            &mut world,
            answered(intent, Answer::Refused(code), at),
            "malformed-create-refused",
        );
    }
    // Owed a refusal of its key, it may get only that one.
    // (As a fresh intent: its first answer is judged by `one-task-per-intent`.)
    let row = world.intents.get_mut(intent).expect("the intent is live");
    row.malformed = Some("INVALID_IDEMPOTENCY_KEY");
    row.first = None;
    clean(
        &mut world,
        answered(intent, Answer::Refused("INVALID_IDEMPOTENCY_KEY"), at),
    );
    for wrong in [
        Answer::Accepted(TASK),
        Answer::Refused("INVALID_INPUT"),
        Answer::Refused("QUOTA_EXCEEDED"),
    ] {
        fires(
            &mut world,
            answered(intent, wrong, at),
            "malformed-create-refused",
        );
    }
}

/// The fingerprint an input carries is the lessons' request fingerprint:
/// SHA-256 of the canonical JSON of the operation and the input's hash.
#[test]
fn an_inputs_fingerprint_is_the_hash_of_its_create() {
    let input = sim::world::stores::db::Input::of(&serde_json::json!({"doc": "d", "title": "t"}));
    let create = format!(
        r#"{{"inputSha256":"{}","operation":"create-document-task"}}"#,
        sim::hash::hex(&input.sha256)
    );
    assert_eq!(input.fingerprint, sim::hash::sha256(create.as_bytes()));
    assert_eq!(
        input.sha256,
        sim::hash::sha256(br#"{"doc":"d","title":"t"}"#)
    );
}

#[test]
fn fires_task_input_matches_fingerprint() {
    let mut world = happy();
    let created = || Touched {
        created: vec![TASK],
        ..Touched::default()
    };
    // Judged where a task is made; the happy path's task holds its input.
    let row = world.db.task(TASK);
    assert_eq!(row.input.fingerprint, row.fingerprint);
    // A task holding another input than its request's (a replay made from
    // a compacted task's placeholder) breaks it.
    world.db.task_mut(TASK).input = world.compacted_input.clone();
    fires(&mut world, created(), "task-input-matches-fingerprint");
}

#[test]
fn fires_dead_letter_replayed_once() {
    use sim::world::engine::ids::DeadLetterId;
    let mut world = happy();
    let letter = DeadLetterId(1);
    // The operator's replay of a letter: a new task, filed under it.
    let replay = |world: &mut World, key: &str| {
        let task = insert_task(world, key);
        world.db.task_mut(task).replay_of = Some(letter);
        world.db.replays.insert(letter, task);
        Touched {
            created: vec![task],
            ..Touched::default()
        }
    };
    let first = replay(&mut world, "doc-1-replay-1");
    clean(&mut world, first);
    // The same letter replayed again, as a second task.
    let second = replay(&mut world, "doc-1-replay-2");
    fires(&mut world, second, "dead-letter-replayed-once");
}

#[test]
fn the_key_rule_is_the_lessons_pattern() {
    use sim::world::truth::intents::refusal_owed;
    let key = |length: usize| "k".repeat(length);
    assert_eq!(refusal_owed(&key(5), true), Some("INVALID_IDEMPOTENCY_KEY"));
    assert_eq!(refusal_owed(&key(6), true), None);
    assert_eq!(refusal_owed(&key(80), true), None);
    assert_eq!(
        refusal_owed(&key(81), true),
        Some("INVALID_IDEMPOTENCY_KEY")
    );
    assert_eq!(refusal_owed("AZaz09_-", true), None);
    for bad in [
        "has.dot",
        "has space",
        "has/slash",
        "ünicode-key",
        "tab\tkey",
    ] {
        assert_eq!(
            refusal_owed(bad, true),
            Some("INVALID_IDEMPOTENCY_KEY"),
            "{bad}"
        );
    }
    // The key is checked first, then the input.
    assert_eq!(refusal_owed(&key(6), false), Some("INVALID_INPUT"));
    assert_eq!(
        refusal_owed(&key(5), false),
        Some("INVALID_IDEMPOTENCY_KEY")
    );
}

#[test]
fn fires_one_task_per_key() {
    let mut world = completed_with_live_record();
    let key = first_key(&world);
    clean(
        &mut world,
        Touched {
            keys: vec![key.clone()],
            ..Touched::default()
        },
    );
    // A second task created under the key while its record lives.
    let second = insert_task(&mut world, &key);
    fires(
        &mut world,
        Touched {
            tasks: vec![second],
            created: vec![second],
            ..Touched::default()
        },
        "one-task-per-key",
    );
}

#[test]
fn one_task_per_key_allows_a_new_task_once_the_record_expired() {
    // A short TTL and a later read keep the run going until the record's
    // retention has ended and it is gone.
    let mut scenario = happy_path_with("idempotency_ttl_ms = 100\nreconcile_every_ms = 100\n");
    let mut later = scenario.requests[0].clone();
    later.at_ms = 2_000;
    later.kind = sim::scenario::RequestKind::ReadStatus {
        target: sim::scenario::Target::Task(TASK),
    };
    scenario.requests.push(later);
    let mut world = drained(&scenario);
    let key = first_key(&world);
    assert!(world.db.record(&key).is_none());
    let second = insert_task(&mut world, &key);
    record(&mut world, &key, second);
    // A create the API accepts is charged to the quota.
    world.db.quota_remaining -= 1;
    clean(
        &mut world,
        Touched {
            tasks: vec![second],
            created: vec![second],
            ..Touched::default()
        },
    );
}

#[test]
fn fires_key_bound_to_fingerprint() {
    let mut world = completed_with_live_record();
    let key = first_key(&world);
    // The same key sent with another input is another intent.
    let mut other = world.db.task(TASK).fingerprint;
    other[0] ^= 0xff;
    let intent = world.intent_for(&key, other, true, false);
    assert_ne!(intent, IntentId(1));
    let at = world.now;
    // Refused as a reuse of the key: fine.
    clean(
        &mut world,
        answered(
            intent,
            Answer::Refused("IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST"),
            at,
        ),
    );
    // Answered with the task created for the first fingerprint.
    fires(
        &mut world,
        answered(intent, Answer::Accepted(TASK), at),
        "key-bound-to-fingerprint",
    );
}

#[test]
fn fires_one_artifact_per_token() {
    let mut world = happy();
    let token = artifact_token();
    let touched = || Touched {
        tokens: vec![token],
        ..Touched::default()
    };
    clean(&mut world, touched());
    // A second written version under the same token (an overwriting put).
    let object = world.store.get_mut(token).expect("the artifact");
    let version = object.versions[0];
    object.versions.push(version);
    fires(&mut world, touched(), "one-artifact-per-token");
}

#[test]
fn fires_one_visible_artifact_per_task() {
    let mut world = happy();
    clean(&mut world, tasks(&[TASK]));
    // A second, verifying, visible artifact of the completed task, written
    // under a token the attempt should never have had (a retry's new one).
    let token = artifact_token();
    let version = world.store.get(token).expect("the artifact").versions[0];
    let stray = Token {
        generation: 1,
        ..token
    };
    assert!(world.store.put(stray, version, false));
    fires(
        &mut world,
        Touched {
            tokens: vec![stray],
            ..Touched::default()
        },
        "one-visible-artifact-per-task",
    );
}

#[test]
fn fires_terminal_never_reopens() {
    let mut world = happy();
    clean(&mut world, tasks(&[TASK]));
    world.db.task_mut(TASK).state.status = Status::Running;
    fires(&mut world, tasks(&[TASK]), "terminal-never-reopens");
}

#[test]
fn fires_version_step_one() {
    let mut world = happy();
    clean(&mut world, tasks(&[TASK]));
    // The version moves with no event appended.
    world.db.task_mut(TASK).state.version += 1;
    fires(&mut world, tasks(&[TASK]), "version-step-one");
}

#[test]
fn fires_event_id_unique() {
    // The same event appended twice.
    let mut world = happy();
    clean(&mut world, tasks(&[TASK]));
    let row = world.db.task_mut(TASK);
    let last = row.events.last().expect("events").clone();
    row.events.push(last);
    fires(&mut world, tasks(&[TASK]), "event-id-unique");

    // A second event at a sequence already taken, under a new id.
    let mut world = happy();
    clean(&mut world, tasks(&[TASK]));
    let row = world.db.task_mut(TASK);
    let mut other = row.events.last().expect("events").clone();
    Arc::make_mut(&mut other.event).event_id = Text::from("task-1:TaskCompleted:1:again");
    row.events.push(other);
    fires(&mut world, tasks(&[TASK]), "event-id-unique");
}

#[test]
fn fires_completed_has_verified_artifact() {
    // The completed task's artifact is hidden.
    let mut world = happy();
    clean(&mut world, tasks(&[TASK]));
    let object = the_artifact(&mut world);
    object.hidden = true;
    fires(
        &mut world,
        tasks(&[TASK]),
        "completed-has-verified-artifact",
    );

    // The completed task's artifact bytes do not match its artifactSha256.
    let mut world = happy();
    clean(&mut world, tasks(&[TASK]));
    let object = the_artifact(&mut world);
    object.versions[0] = corrupt_bytes(object.versions[0]);
    fires(
        &mut world,
        tasks(&[TASK]),
        "completed-has-verified-artifact",
    );

    // The artifact is gone.
    let mut world = happy();
    clean(&mut world, tasks(&[TASK]));
    world.store.remove(artifact_token());
    fires(
        &mut world,
        tasks(&[TASK]),
        "completed-has-verified-artifact",
    );

    // Judged at the completing commit: the artifact it names is the
    // transform of the task's own input. One of another input (worker,
    // world and store agreeing among themselves) breaks it.
    let mut world = happy();
    let completed = || committed_by(EventType::TaskCompleted, ActorId::RECONCILER);
    clean(&mut world, completed());
    world.db.task_mut(TASK).input = world.compacted_input.clone();
    fires(&mut world, completed(), "completed-has-verified-artifact");
}

#[test]
fn fires_no_visible_corrupt_artifact() {
    // The store corrupts the first put: the worker sees the mismatch, hides
    // the artifact (compensation) and fails the task.
    let scenario = corrupt_scenario();
    let mut world = drained(&scenario);
    let state = world.db.task(TASK).state.clone();
    assert_eq!(state.status, Status::Failed);
    assert_eq!(
        state.terminal_error_code.as_deref(),
        Some("ARTIFACT_HASH_MISMATCH")
    );
    let token = artifact_token();
    assert!(world.store.get(token).is_some_and(|object| object.hidden));
    let touched = || Touched {
        tokens: vec![token],
        ..Touched::default()
    };
    clean(&mut world, touched());
    // The compensation's hide is undone: the corrupt artifact shows.
    world.store.get_mut(token).expect("the artifact").hidden = false;
    fires(&mut world, touched(), "no-visible-corrupt-artifact");
}

fn corrupt_scenario() -> Scenario {
    let text = r#"
name = "corrupt-put"
seed = 1
steps_max = 10000

[config]
apis = 1
publishers = 1
workers = 1

[[requests]]
at = 0
kind = "create"
key = "intent-0001"
input = { doc = "doc-1", title = "demo" }

[[faults]]
site = "store.put"
kind = "corrupt"
nth = 1
"#;
    sim::scenario::parse::parse(text, None).unwrap_or_else(|error| panic!("{error}"))
}

#[test]
fn fires_replay_matches_state() {
    // The state row says something its events never did.
    let mut world = happy();
    clean(&mut world, tasks(&[TASK]));
    world.db.task_mut(TASK).state.terminal_error_code = Some(Text::from("MADE_UP"));
    fires(&mut world, tasks(&[TASK]), "replay-matches-state");

    // A legal event (the running attempt fails for good) is appended with
    // the version moved by one, but the state row still says running.
    let mut world = stepped_until(&happy_path_with(""), |world| {
        world
            .db
            .find_task(TASK)
            .is_some_and(|row| row.state.status == Status::Running)
    });
    clean(&mut world, tasks(&[TASK]));
    let row = world.db.task_mut(TASK);
    let mut failed = row.events[0].clone();
    failed.event = Arc::new(TaskEvent {
        event_id: Text::from("task-1:TaskFailed:1"),
        sequence: 2,
        body: EventBody::TaskFailed {
            attempt: 1,
            error_code: Text::from("MADE_UP"),
        },
        ..(*failed.event).clone()
    });
    failed.payload_sha256 = event_payload_sha256(&failed.event);
    row.events.push(failed);
    row.state.version = 2;
    fires(&mut world, tasks(&[TASK]), "replay-matches-state");
}

#[test]
fn fires_cache_never_ahead() {
    let mut world = happy();
    let touched = || Touched {
        cache: vec![TASK],
        ..Touched::default()
    };
    clean(&mut world, touched());
    // The current state, and a stale but real one, may be cached.
    for (status, version) in [(Status::Completed, 2), (Status::Running, 1)] {
        world
            .cache
            .entries
            .insert(TASK, CacheEntry::View { status, version });
        clean(&mut world, touched());
    }
    // A view at a version the database never reached.
    world.cache.entries.insert(
        TASK,
        CacheEntry::View {
            status: Status::Completed,
            version: 3,
        },
    );
    fires(&mut world, touched(), "cache-never-ahead");
    // A view at a real version with a status the task never had there.
    world.cache.entries.insert(
        TASK,
        CacheEntry::View {
            status: Status::Cancelled,
            version: 2,
        },
    );
    fires(&mut world, touched(), "cache-never-ahead");
}

#[test]
fn fires_stale_fill_refused() {
    let mut world = happy();
    let running = CacheEntry::View {
        status: Status::Running,
        version: 1,
    };
    let filled = |world: &mut World, found: Option<CacheEntry>, stored: CacheEntry| {
        world.cache.entries.insert(TASK, stored);
        Touched {
            fills: vec![(TASK, found)],
            ..Touched::default()
        }
    };
    // A fill into an absent (evicted) entry, or at the tombstone's own
    // version, is fine.
    let touched = filled(&mut world, None, running);
    clean(&mut world, touched);
    let completed = CacheEntry::View {
        status: Status::Completed,
        version: 2,
    };
    let tombstone = CacheEntry::Tombstone { version: 2 };
    let touched = filled(&mut world, Some(tombstone), completed);
    clean(&mut world, touched);
    // A read of v1 lands over the invalidation of v2, or over a view of v2.
    let touched = filled(&mut world, Some(tombstone), running);
    fires(&mut world, touched, "stale-fill-refused");
    let touched = filled(&mut world, Some(completed), running);
    fires(&mut world, touched, "stale-fill-refused");
}

#[test]
fn fires_cache_floor_kept() {
    let mut world = happy();
    let floor = CacheEntry::Tombstone { version: 2 };
    // A write that found the tombstone of v2 and left `after`.
    let wrote = |world: &mut World, after: Option<CacheEntry>| {
        world.cache.entries.remove(TASK);
        if let Some(after) = after {
            world.cache.entries.insert(TASK, after);
        }
        Touched {
            cache_writes: vec![(TASK, Some(floor))],
            ..Touched::default()
        }
    };
    // A later invalidation, or a view at the tombstone's version: kept.
    let touched = wrote(&mut world, Some(CacheEntry::Tombstone { version: 3 }));
    clean(&mut world, touched);
    let current = CacheEntry::View {
        status: world.db.task(TASK).state.status,
        version: 2,
    };
    let touched = wrote(&mut world, Some(current));
    clean(&mut world, touched);
    // An eviction that dropped it, or a delete that lowered it.
    let touched = wrote(&mut world, None);
    fires(&mut world, touched, "cache-floor-kept");
    let touched = wrote(&mut world, Some(CacheEntry::Tombstone { version: 1 }));
    fires(&mut world, touched, "cache-floor-kept");
}

#[test]
fn fires_invalidated_before_ack() {
    let mut world = happy();
    let modelled = world
        .projector
        .models
        .get(TASK)
        .expect("a model")
        .state
        .clone();
    let acked = || Touched {
        projector_done: vec![TASK],
        ..Touched::default()
    };
    // The invalidation's tombstone at the model's version, a view filled
    // at it since, or nothing cached: the delivery may go.
    for entry in [
        Some(CacheEntry::Tombstone {
            version: modelled.version,
        }),
        Some(CacheEntry::View {
            status: modelled.status,
            version: modelled.version,
        }),
        None,
    ] {
        world.cache.entries.remove(TASK);
        if let Some(entry) = entry {
            world.cache.entries.insert(TASK, entry);
        }
        clean(&mut world, acked());
    }
    // A view of the version before, still there when the projector acks:
    // its invalidation failed and was not retried.
    world.cache.entries.insert(
        TASK,
        CacheEntry::View {
            status: Status::Running,
            version: modelled.version - 1,
        },
    );
    fires(&mut world, acked(), "invalidated-before-ack");
}

#[test]
fn fires_projection_consistent() {
    let mut world = happy();
    let touched = || Touched {
        projection: vec![TASK],
        ..Touched::default()
    };
    let model = world
        .projector
        .models
        .get(TASK)
        .expect("the projector modelled task-1")
        .clone();
    assert_eq!(model.state, world.db.task(TASK).state);
    clean(&mut world, touched());
    // The read model claims a state the task never had at that version.
    world
        .projector
        .models
        .get_mut(TASK)
        .expect("model")
        .state
        .status = Status::Failed;
    fires(&mut world, touched(), "projection-consistent");
    // Or a version it never reached.
    let mut ahead = model.clone();
    ahead.state.version = 3;
    world.projector.models.insert(TASK, ahead);
    fires(&mut world, touched(), "projection-consistent");
}

#[test]
fn fires_conflicting_event_never_applied() {
    let mut world = happy();
    let touched = || Touched {
        projection: vec![TASK],
        ..Touched::default()
    };
    clean(&mut world, touched());
    // The model's state is right, but the event it applied at sequence 2
    // carried another payload than the stored one under the same id.
    let model = world.projector.models.get_mut(TASK).expect("model");
    assert_eq!(model.applied.len(), 2, "created and completed");
    model.applied[1].1[0] ^= 0xff;
    fires(&mut world, touched(), "conflicting-event-never-applied");
    // Another id at that sequence is a history conflict, not this one's
    // business: the stored id is what it compares.
    let model = world.projector.models.get_mut(TASK).expect("model");
    model.applied[1].0 = Text::from("evt-other");
    clean(&mut world, touched());
}

/// task-1 completed under a quota of `quota`, then a second accepted
/// create under a new key.
fn second_create(quota: u64) -> (World, Touched) {
    let mut world = drained(&happy_path_with(&format!("quota = {quota}\n")));
    clean(&mut world, tasks(&[TASK]));
    let second = insert_task(&mut world, "intent-0002");
    record(&mut world, "intent-0002", second);
    world.db.quota_remaining = world.db.quota_remaining.saturating_sub(1);
    let touched = Touched {
        tasks: vec![second],
        created: vec![second],
        ..Touched::default()
    };
    (world, touched)
}

#[test]
fn fires_quota_never_oversold() {
    // Within a quota of 2, the second create is fine.
    let (mut world, touched) = second_create(2);
    clean(&mut world, touched);
    // With a quota of 1 it overspends.
    let (mut world, touched) = second_create(1);
    fires(&mut world, touched, "quota-never-oversold");
}

#[test]
fn fires_quota_exact() {
    let (mut world, touched) = second_create(3);
    clean(&mut world, touched);
    // Judged at the next answer (the first intent's retry, answered as
    // before): a create charged twice (a retry charging again) breaks it.
    let intent = IntentId(1);
    let at = last_ms_bound(&world, intent);
    let retry = || answered(intent, Answer::Accepted(TASK), at);
    clean(&mut world, retry());
    world.db.quota_remaining -= 1;
    fires(&mut world, retry(), "quota-exact");
    // So does one charged nothing.
    world.db.quota_remaining += 2;
    fires(&mut world, retry(), "quota-exact");
    // A refusal with quota left undersells it; with the quota spent it
    // is what the quota asks for.
    let mut world = happy();
    let refused = || answered(intent, Answer::Refused("QUOTA_EXCEEDED"), at + 2);
    fires(&mut world, refused(), "quota-exact");
    world.db.quota_total = 1;
    world.db.quota_remaining = 0;
    clean(&mut world, refused());
}

/// The inbox row the happy path left (task-1's TaskCreated message).
fn inbox_row(world: &World) -> InboxRow {
    let row = world
        .db
        .inbox
        .values()
        .next()
        .expect("the worker registered a delivery")
        .clone();
    assert!(row.state.is_final());
    row
}

fn act(world: &mut World, touch: DeliveryTouch) -> Option<&'static str> {
    fired(
        world,
        Touched {
            deliveries: vec![touch],
            ..Touched::default()
        },
    )
}

/// A new delivery of `message` with `payload_sha256`, registered; then
/// `then` acts on it. What the check of `then` fired.
fn delivery_acts(
    world: &mut World,
    message: OutboxId,
    payload_sha256: sim::hash::Sha,
    then: DeliveryAct,
) -> Option<&'static str> {
    let delivery = world.new_delivery_id();
    let touch = |act| DeliveryTouch {
        delivery,
        message,
        payload_sha256,
        act,
    };
    assert_eq!(act(world, touch(DeliveryAct::Register)), None);
    act(world, touch(then))
}

#[test]
fn fires_inbox_conflict_quarantined() {
    let mut world = happy();
    let row = inbox_row(&world);
    let mut other = row.payload_sha256;
    other[0] ^= 0xff;
    // A conflicting delivery that is quarantined (or let go) is fine.
    for then in [DeliveryAct::Quarantine, DeliveryAct::Drop] {
        assert_eq!(delivery_acts(&mut world, row.message, other, then), None);
    }
    // Processed, or acked as a duplicate: both break it.
    for then in [DeliveryAct::Work, DeliveryAct::Ack(row.result)] {
        assert_eq!(
            delivery_acts(&mut world, row.message, other, then),
            Some("inbox-conflict-quarantined"),
            "{then:?}"
        );
    }
}

#[test]
fn fires_job_ends_with_an_answer() {
    let mut world = happy();
    // A message no inbox row knows: a fresh delivery, not a duplicate.
    let message = OutboxId(9_999);
    let ends_after = |world: &mut World, then: Option<DeliveryAct>| {
        let delivery = world.new_delivery_id();
        let touch = |act| DeliveryTouch {
            delivery,
            message,
            payload_sha256: [7; 32],
            act,
        };
        let mut acts = vec![touch(DeliveryAct::Register)];
        acts.extend(then.map(touch));
        acts.push(touch(DeliveryAct::End));
        fired(
            world,
            Touched {
                deliveries: acts,
                ..Touched::default()
            },
        )
    };
    // Answered or let go before the job ends: fine.
    for then in [DeliveryAct::Ack(None), DeliveryAct::Nack, DeliveryAct::Drop] {
        assert_eq!(ends_after(&mut world, Some(then)), None, "{then:?}");
    }
    // Processed and then dropped on the floor: the delivery is abandoned.
    assert_eq!(
        ends_after(&mut world, Some(DeliveryAct::Work)),
        Some("job-ends-with-an-answer")
    );
    assert!(sim::invariants::is_invariant("job-ends-with-an-answer"));
}

/// The checker keeps the class of each delivery a worker registered until
/// it is answered; a worker that crashes holding one never answers it, and
/// the broker hands the message out again under a new delivery id. So
/// what is open is exactly the deliveries of the workers' registered jobs
/// (no fewer: the checks of those still to come need their class),
/// however many workers crashed holding one.
#[test]
fn deliveries_open_in_the_checker_are_the_workers_jobs_after_crashes() {
    use sim::world::actors::worker::WorkerPhase;
    let mut world = sim::cli::bench::bench_world(60_000);
    let holding = |world: &World| -> Vec<bool> {
        world
            .workers
            .iter()
            .map(|w| w.job.is_some() && w.phase != WorkerPhase::Register)
            .collect()
    };
    let mut crashed_holding_a_job = 0;
    let mut before = holding(&world);
    while world.steps < 60_000 {
        if world.step() != Stepped::Step {
            break;
        }
        crashed_holding_a_job += world
            .workers
            .iter()
            .zip(&before)
            .filter(|(worker, held)| **held && !worker.life.up)
            .count();
        before = holding(&world);
        let jobs = before.iter().filter(|held| **held).count();
        assert_eq!(
            world.checker.open_deliveries(),
            jobs,
            "step {}: open deliveries against registered jobs",
            world.steps
        );
    }
    assert!(world.violation.is_none(), "{:?}", world.violation);
    assert!(
        crashed_holding_a_job > 0,
        "workers crashed holding a registered job"
    );
}

/// Intents follow the requests in flight. Each counts exactly the client
/// requests and API calls that carry it; one a request carries leaves only
/// when its key's record expires; and one stays only while something can
/// still be judged against it: a request carries it, its first answer
/// binds retries until a deadline still ahead, or it is its key's live
/// record's intent, forgotten when the record's retention ends.
/// Given-up requests and requests refused for reusing a key no longer leave
/// their intent behind for good.
#[test]
fn intents_are_forgotten_once_nothing_can_judge_them() {
    use sim::world::engine::step::Verb;
    use std::collections::{BTreeMap, BTreeSet};
    let mut world = sim::cli::bench::bench_world(60_000);
    let mut most = 0;
    // Carried intents already seen gone: only the expiry of their key's
    // record may take an intent a request still carries.
    let mut gone: BTreeSet<IntentId> = BTreeSet::new();
    while world.steps < 60_000 {
        let before = world.steps;
        if world.step() != Stepped::Step {
            break;
        }
        let expired = world
            .trace
            .tail((world.steps - before) as usize)
            .iter()
            .any(|record| record.verb == Verb::Expire);
        let mut carried: BTreeMap<IntentId, u32> = BTreeMap::new();
        let carriers = world.outgoing.values().map(|request| request.intent);
        for intent in carriers.chain(world.calls.values().map(|call| call.intent)) {
            let Some(intent) = intent else {
                continue;
            };
            if world.intents.get(intent).is_some() {
                *carried.entry(intent).or_default() += 1;
            } else if gone.insert(intent) {
                assert!(
                    expired,
                    "step {}: {intent} was forgotten while a request carries it",
                    world.steps
                );
            }
        }
        for (&id, &count) in &carried {
            assert_eq!(world.intents.get(id).map(|row| row.carried), Some(count));
        }
        let counted: u32 = world.intents.values().map(|row| row.carried).sum();
        assert_eq!(
            counted,
            carried.values().sum::<u32>(),
            "step {}",
            world.steps
        );
        for row in world.intents.values() {
            let deadline_ahead = row.first.is_some_and(|first| world.now < first.deadline_ms);
            let records_intent = world
                .db
                .record(&row.key)
                .is_some_and(|record| record.fingerprint == row.fingerprint);
            assert!(
                row.carried > 0 || deadline_ahead || records_intent,
                "step {}: {row:?} is judged by nothing",
                world.steps
            );
        }
        most = most.max(world.intents.len());
    }
    assert!(world.violation.is_none(), "{:?}", world.violation);
    assert!(most > 0, "the workload makes intents");
}

/// An intent holds until its first answer's deadline (its record's TTL);
/// a create with the same key and input after that is a new intent,
/// judged from its own first answer (the story is in the scenario's
/// description). Without the mutant the same requests run clean: the
/// second record lives for its TTL and answers the last create with
/// task-2.
#[test]
fn a_create_after_an_intents_deadline_is_judged_as_a_new_intent() {
    let scenario = load_scenario("regressions/key-reuse-retried-after-deadline");
    let finished = execute(&scenario, world_for(&scenario), |_, _| {});
    let violation = finished.outcome.violation.expect("the mutant is caught");
    assert_eq!(violation.invariant, "one-task-per-intent");
    assert!(
        violation
            .message
            .contains("first got task-2 and then task-3"),
        "{}",
        violation.message
    );
    let mut honest = scenario.clone();
    honest.mutant = None;
    drained(&honest);
}

#[test]
fn fires_inbox_final_never_rewritten() {
    let mut world = happy();
    let row = inbox_row(&world);
    let written = || Touched {
        inbox: vec![row.message],
        ..Touched::default()
    };
    // Written again as it was: fine.
    clean(&mut world, written());
    // A late writer turns the completed row into a failure.
    let late = world.db.inbox.get_mut(row.message).expect("the row");
    late.state = sim::world::stores::db::InboxState::Failed;
    late.result = Some(sim::world::stores::db::ProcessResult::Failed {
        task: TASK,
        code: "LEASE_LOST",
    });
    fires(&mut world, written(), "inbox-final-never-rewritten");
    // A late writer that finalizes it again with the same result: the
    // write itself is the guard skipped.
    let mut world = happy();
    let late = world.db.inbox.get_mut(row.message).expect("the row");
    late.completed_ms = late.completed_ms.map(|ms| ms + 1);
    fires(&mut world, written(), "inbox-final-never-rewritten");
}

#[test]
fn fires_duplicate_acked_with_first_result() {
    let mut world = happy();
    let row = inbox_row(&world);
    let result = row.result.expect("a final row records its result");
    // A duplicate acked with the recorded result is fine.
    assert_eq!(
        delivery_acts(
            &mut world,
            row.message,
            row.payload_sha256,
            DeliveryAct::Ack(Some(result))
        ),
        None
    );
    // Acked with another result, with none, processed again, or nacked.
    let wrong = sim::world::stores::db::ProcessResult::Failed {
        task: TASK,
        code: "ARTIFACT_HASH_MISMATCH",
    };
    for then in [
        DeliveryAct::Ack(Some(wrong)),
        DeliveryAct::Ack(None),
        DeliveryAct::Work,
        DeliveryAct::Nack,
    ] {
        assert_eq!(
            delivery_acts(&mut world, row.message, row.payload_sha256, then),
            Some("duplicate-acked-with-first-result"),
            "{then:?}"
        );
    }
}

/// Steps a scenario's world until `done` holds, checking every step.
fn stepped_until(scenario: &Scenario, done: impl Fn(&World) -> bool) -> World {
    let mut world = world_for(scenario);
    while !done(&world) {
        assert_eq!(world.step(), Stepped::Step, "the world gets there");
        assert_eq!(world.violation, None);
    }
    world
}

/// The happy path stepped until the broker has handed out its first
/// `task-work` entry.
fn mid_delivery() -> (World, EntryId) {
    let in_flight = |world: &World| {
        world
            .broker
            .entries
            .values()
            .find(|entry| {
                entry.topic == Topic::TaskWork && matches!(entry.state, EntryState::InFlight { .. })
            })
            .map(|entry| entry.id)
    };
    let world = stepped_until(&happy_path_with(""), |world| in_flight(world).is_some());
    let entry = in_flight(&world).expect("in flight");
    assert_eq!(world.broker.entries.get(entry).unwrap().deliveries, 1);
    (world, entry)
}

#[test]
fn fires_bounded_deliveries() {
    let (mut world, entry) = mid_delivery();
    let limit = world.config.delivery_attempts_max as u32;
    let delivered = |world: &World| Touched {
        entries: vec![entry],
        delivered: vec![(entry, world.broker.entries.get(entry).unwrap().deliveries)],
        ..Touched::default()
    };
    let touched = delivered(&world);
    clean(&mut world, touched);
    // Delivered as often as allowed: still fine.
    world
        .broker
        .entries
        .get_mut(entry)
        .expect("entry")
        .deliveries = limit;
    let touched = delivered(&world);
    clean(&mut world, touched);
    // Once more than allowed.
    world
        .broker
        .entries
        .get_mut(entry)
        .expect("entry")
        .deliveries = limit + 1;
    let touched = delivered(&world);
    fires(&mut world, touched, "bounded-deliveries");
}

#[test]
fn fires_no_orphan_message() {
    let mut world = happy();
    let row: OutboxRow = world.db.outbox_row(OutboxId(1)).clone();
    let now = world.now;
    let entries = |entry: EntryId| Touched {
        entries: vec![entry],
        ..Touched::default()
    };
    // A republish of a committed row is fine.
    let republish = world.broker.publish(
        row.topic,
        row.id,
        row.task,
        row.payload.clone(),
        row.payload_sha256,
        now,
    );
    clean(&mut world, entries(republish));
    // An entry whose message id names no outbox row.
    let orphan = world.broker.publish(
        row.topic,
        world.db.next_outbox_id(),
        row.task,
        row.payload.clone(),
        row.payload_sha256,
        now,
    );
    fires(&mut world, entries(orphan), "no-orphan-message");
    // An entry under a committed row's id with another payload.
    let Payload::Work { .. } = row.payload else {
        panic!("outbox-1 is task-1's TaskCreated");
    };
    let altered = row.payload.tampered();
    let forged = world.broker.publish(
        row.topic,
        row.id,
        row.task,
        altered.clone(),
        altered.sha256(),
        now,
    );
    fires(&mut world, entries(forged), "no-orphan-message");
}

#[test]
fn fires_converges() {
    let world = happy();
    assert_eq!(world.convergence_failures(), Vec::<String>::new());

    // A dead letter the operator replayed that no task replays.
    let mut world = happy();
    world
        .replays_owed
        .push(sim::world::engine::ids::DeadLetterId(1));
    let failures = world.convergence_failures();
    assert!(
        failures.iter().any(
            |f| f.contains("dead-letter-1 was replayed by the operator but no task replays it")
        ),
        "converges: {failures:?}"
    );

    // An outbox row left unpublished.
    let mut world = happy();
    world.db.outbox_row_mut(OutboxId(1)).published_ms = None;
    let failures = world.convergence_failures();
    assert!(
        failures
            .iter()
            .any(|f| f.contains("outbox-1 is not published")),
        "converges: {failures:?}"
    );

    // A task left running, not in manual review; in review it is excused.
    let mut world = happy();
    world.db.task_mut(TASK).state.status = Status::Running;
    // The read model would lag the hand-edited row; leave it absent.
    world.projector.models.remove(TASK);
    let failures = world.convergence_failures();
    assert!(
        failures
            .iter()
            .any(|f| f.contains("task-1 is running and not in manual review")),
        "converges: {failures:?}"
    );
    review_artifact(&mut world);
    assert_eq!(world.convergence_failures(), Vec::<String>::new());

    // A message still in flight.
    let mut world = happy();
    let row = world.db.outbox_row(OutboxId(1)).clone();
    let now = world.now;
    world.broker.publish(
        row.topic,
        row.id,
        row.task,
        row.payload,
        row.payload_sha256,
        now,
    );
    let failures = world.convergence_failures();
    assert!(
        failures.iter().any(|f| f.contains("is still in task-work")),
        "converges: {failures:?}"
    );

    // A cached view behind the database.
    let mut world = happy();
    world.cache.entries.insert(
        TASK,
        CacheEntry::View {
            status: Status::Running,
            version: 1,
        },
    );
    let failures = world.convergence_failures();
    assert!(
        failures
            .iter()
            .any(|f| f.contains("the cache shows task-1 running/v1")),
        "converges: {failures:?}"
    );
    // The same view of a task in manual review (its event dead-lettered
    // past its re-drives): the review owns what is left behind.
    world.db.review(
        Some(TASK),
        ReviewReason::DeadLettered,
        "outbox-3".to_string(),
        world.now,
    );
    let failures = world.convergence_failures();
    assert!(
        !failures.iter().any(|f| f.contains("the cache shows")),
        "converges: {failures:?}"
    );
}

#[test]
fn fires_uncommitted_writes_nothing() {
    use sim::faults::{FaultKind, Site};
    use sim::trace::Record;
    use sim::world::engine::ids::DeadLetterId;
    // A run with a scripted crash before a commit (the reconciler's, before
    // a review), which wrote nothing and ran clean.
    let scripted = load_scenario("regressions/reconciler-crash-before-review");
    let mut world = drained(&scripted);
    // A dead letter the reconciler has not looked at yet; the drained
    // world's last step, with it, is the baseline.
    world.broker.unseen_dead_letters.push(DeadLetterId(1));
    clean(&mut world, Touched::default());
    // The reconciler's re-drive crashed before its commit, and wrote
    // nothing: clean.
    let crashed = Record {
        step: world.steps + 1,
        actor: ActorId::RECONCILER,
        verb: Verb::Redrive,
        task: Some(TASK),
        fault: Some((Site::DbCommit, FaultKind::CrashBeforeCommit)),
        ..Record::blank()
    };
    world.trace.push(&crashed);
    clean(&mut world, Touched::default());
    // The same step, had it marked the dead letter handled before its
    // crash check: the letter leaves the list with no re-drive for it.
    world.broker.unseen_dead_letters.pop();
    fires(&mut world, Touched::default(), "uncommitted-writes-nothing");
    // Or charged the quota.
    let mut world = drained(&scripted);
    clean(&mut world, Touched::default());
    world.trace.push(&crashed);
    world.db.quota_remaining -= 1;
    fires(&mut world, Touched::default(), "uncommitted-writes-nothing");
}

#[test]
fn every_invariant_has_a_firing_test_here() {
    let source = include_str!("invariants.rs");
    let mut missing = Vec::new();
    for invariant in INVARIANTS {
        let test = format!("fn fires_{}(", invariant.id.replace('-', "_"));
        let quoted = format!("\"{}\"", invariant.id);
        let named = invariant.id == "converges" || source.contains(&quoted);
        if !source.contains(&test) || !named {
            missing.push(invariant.id);
        }
    }
    assert!(
        missing.is_empty(),
        "invariants without a `fires_*` test asserting their id in tests/invariants.rs: {missing:?}"
    );
}

/// `converges` holds a poison failure to its dead letter: a failed task
/// whose message never reached the dead-letter queue has lost it.
#[test]
fn converges_fires_for_a_poison_failure_without_its_dead_letter() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/poison-message.toml");
    let scenario = sim::scenario::parse::load(&path).expect("the scenario loads");
    let finished = crate::common::run_clean(&scenario);
    let mut world = finished.world;
    assert_eq!(world.convergence_failures(), Vec::<String>::new());
    // Paid twice: two letters could replay the same work twice.
    let mut twice = world.clone();
    let again = twice.broker.dead_letters[0].clone();
    twice.broker.dead_letters.push(again);
    let failures = twice.convergence_failures();
    assert!(
        failures
            .iter()
            .any(|f| f.starts_with("outbox-1 was dead-lettered again for UNSUPPORTED_FORMAT")),
        "converges: {failures:?}"
    );
    world.broker.dead_letters.clear();
    let failures = world.convergence_failures();
    assert!(
        failures.iter().any(|f| f
            == "task-1 failed with UNSUPPORTED_FORMAT and its message never reached the dead-letter queue"),
        "converges: {failures:?}"
    );
}

/// `converges` asks every client request to end: answered, given up after
/// its budget, or lost with its client. One still pending in a quiet world
/// has no wake left to end it (a client that stopped retrying).
#[test]
fn converges_fires_for_a_request_left_pending() {
    use sim::world::actors::client::{ClientOp, Outgoing};
    use sim::world::engine::ids::RequestId;
    use sim::world::input::Target;
    let mut world = happy();
    assert_eq!(world.convergence_failures(), Vec::<String>::new());
    world.outgoing.insert(
        RequestId(99),
        Outgoing {
            client: 0,
            op: ClientOp::Read {
                target: Target::Task(TASK),
            }
            .into(),
            intent: None,
            sends: 1,
            next_api: 0,
            incarnation: 1,
        },
    );
    fails_to_converge_with(
        &world,
        "request-99 of client-1 is still pending after 1 sends",
    );
}

/// Asserts that `converges` reports `line` among the world's failures.
fn fails_to_converge_with(world: &World, line: &str) {
    let failures = world.convergence_failures();
    assert!(
        failures.iter().any(|f| f == line),
        "converges: {failures:?}"
    );
}

#[test]
fn converges_fires_for_a_call_left_in_flight() {
    use sim::world::actors::api::{ApiPhase, Call};
    use sim::world::actors::client::ClientOp;
    use sim::world::engine::ids::{CallId, RequestId};
    use sim::world::input::Target;
    let mut world = happy();
    assert_eq!(world.convergence_failures(), Vec::<String>::new());
    world.calls.insert(
        CallId(99),
        Call {
            request: RequestId(7),
            op: ClientOp::Read {
                target: Target::Task(TASK),
            }
            .into(),
            intent: None,
            api: 0,
            incarnation: 1,
            phase: ApiPhase::Arrive,
        },
    );
    fails_to_converge_with(&world, "call-99 (request-7) is still in flight at api-1");
}

#[test]
fn converges_fires_for_an_intent_still_carried() {
    use sim::world::engine::ids::IntentId;
    use sim::world::truth::intents::Intent;
    let mut world = happy();
    assert_eq!(world.convergence_failures(), Vec::<String>::new());
    let intent = Intent {
        key: sim::task::Text::from("key-000099"),
        fingerprint: [0; 32],
        first: None,
        carried: 0,
        malformed: None,
    };
    // Carried by nothing: held for an answer it may bind, not a failure.
    world.intents.insert(IntentId(99), intent.clone());
    assert_eq!(world.convergence_failures(), Vec::<String>::new());
    world.intents.insert(
        IntentId(99),
        Intent {
            carried: 1,
            ..intent
        },
    );
    fails_to_converge_with(
        &world,
        "intent-99 (key-000099) is still carried 1 time(s) with nothing in flight",
    );
}

/// Sends task-1 to manual review for its artifact, as a store that cannot
/// confirm a put does: what `converges` then excuses.
fn review_artifact(world: &mut World) {
    let now = world.now;
    world.db.review(
        Some(TASK),
        ReviewReason::StoreCannotConfirm,
        artifact_token().to_string(),
        now,
    );
}

/// Touches `key`, as an expiry step does.
fn key_touched(key: &Text) -> Touched {
    Touched {
        keys: vec![key.clone()],
        ..Touched::default()
    }
}

/// Marks every outbox row of `task` published (`Some`) or one of them not.
fn set_published(world: &mut World, task: TaskId, all: bool) {
    let rows = world.db.task(task).outbox_rows.clone();
    assert!(!rows.is_empty(), "{task} has outbox rows");
    for (index, id) in rows.iter().enumerate() {
        let unpublished = !all && index + 1 == rows.len();
        world.db.outbox_row_mut(*id).published_ms = (!unpublished).then_some(1);
    }
}

#[test]
fn fires_retained_until_settled() {
    // A record that expires once its task is settled is what retention is.
    let mut world = completed_with_live_record();
    let key = first_key(&world);
    clean(&mut world, key_touched(&key));
    set_published(&mut world, TASK, true);
    world.db.remove_record(&key);
    clean(&mut world, key_touched(&key));
    // One message of the completed task not yet published: too early.
    let mut world = completed_with_live_record();
    clean(&mut world, key_touched(&key));
    set_published(&mut world, TASK, false);
    world.db.remove_record(&key);
    fires(&mut world, key_touched(&key), "retained-until-settled");
    // So is a task that is not terminal.
    let mut world = completed_with_live_record();
    clean(&mut world, key_touched(&key));
    set_published(&mut world, TASK, true);
    world.db.task_mut(TASK).state.status = Status::Running;
    world.db.remove_record(&key);
    fires(&mut world, key_touched(&key), "retained-until-settled");
}

#[test]
fn retained_until_settled_fires_when_a_task_is_compacted_unsettled() {
    let mut world = happy();
    assert!(world.compact_task(TASK));
    clean(&mut world, Touched::default());
    // An effect still without its outcome, or a message not yet
    // published: the reconciler leaves the task whole; a compaction that
    // went ahead anyway (noted as the reconciler's does) fires.
    let unsettled: [&dyn Fn(&mut World); 2] = [
        &|world| world.db.task_mut(TASK).effects[0].state = EffectState::Unknown,
        &|world| set_published(world, TASK, false),
    ];
    for unsettle in unsettled {
        let mut world = happy();
        unsettle(&mut world);
        assert!(!world.compact_task(TASK), "an unsettled task is left whole");
        assert!(!world.db.task(TASK).compacted);
        clean(&mut world, Touched::default());
        let World {
            checker, db, store, ..
        } = &mut world;
        checker.note_compaction(db, store, TASK, None);
        fires(&mut world, Touched::default(), "retained-until-settled");
    }
    // A settled task that a publisher's claimed batch still carries (its
    // claim ran out while another published the row): left whole, and a
    // compaction that went ahead fires. An idle publisher's old batch
    // carries nothing.
    let mut world = happy();
    let row = world.db.task(TASK).outbox_rows[0];
    world.publishers[0].claimed = vec![row];
    assert!(world.carried_by(TASK).is_none());
    world.publishers[0].phase = PublisherPhase::Marking;
    assert!(!world.compact_task(TASK), "a claimed task is left whole");
    let carried = world.carried_by(TASK);
    assert!(
        carried
            .as_deref()
            .is_some_and(|why| why.contains("publisher-1"))
    );
    let World {
        checker, db, store, ..
    } = &mut world;
    checker.note_compaction(db, store, TASK, carried);
    fires(&mut world, Touched::default(), "retained-until-settled");
}

#[test]
fn fires_compensation_recorded() {
    // Cancel-wins: the fence hides task-1's verified artifact and writes
    // the compensation's own ledger row before it does.
    let mut world = drained(&load_scenario("cancel-complete-race-cancel-wins"));
    let hidden: Vec<Token> = world
        .store
        .tokens_of(TASK)
        .iter()
        .copied()
        .filter(|token| world.store.get(*token).is_some_and(|object| object.hidden))
        .collect();
    assert!(!hidden.is_empty(), "the cancel-wins race hides an artifact");
    clean(&mut world, tasks(&[TASK]));
    // The same hide without its ledger row.
    world
        .db
        .task_mut(TASK)
        .effects
        .retain(|row| row.token.kind != EffectKind::Compensation);
    fires(&mut world, tasks(&[TASK]), "compensation-recorded");
    // The other way: the happy path's visible artifact, its ledger row
    // claiming a compensation the store does not show.
    let mut world = happy();
    clean(&mut world, tasks(&[TASK]));
    world
        .db
        .task_mut(TASK)
        .effect_mut(artifact_token())
        .expect("the artifact's ledger row")
        .state = sim::world::stores::db::EffectState::Compensated;
    fires(&mut world, tasks(&[TASK]), "compensation-recorded");
}

#[test]
fn fires_start_names_its_holder() {
    let mut world = stepped_until(&happy_path_with(""), task_running);
    let worker = ActorId::new(ActorKind::Worker, 0);
    let started = || committed_by(EventType::TaskStarted, worker);
    clean(&mut world, started());
    // The event names another worker than the one that holds the lease.
    let mut other = world.clone();
    other.db.task_mut(TASK).state.worker_id = Some(Text::from("worker-2"));
    fires(&mut other, started(), "start-names-its-holder");
    // Or a lease that is not the one granted.
    let state = &mut world.db.task_mut(TASK).state;
    state.lease_until_epoch_ms = state.lease_until_epoch_ms.map(|until| until * 2);
    fires(&mut world, started(), "start-names-its-holder");
}

#[test]
fn fires_lease_never_taken_live() {
    let mut world = stepped_until(&happy_path_with(""), task_running);
    let now = world.now;
    let worker = Lease {
        attempt: 1,
        holder: ActorId::new(ActorKind::Worker, 0),
        incarnation: 0,
        until_ms: now + 1_000,
    };
    let granted = |world: &mut World, old: Lease, new: Lease| {
        world.db.set_lease(TASK, Some(new));
        Touched {
            leases: vec![(TASK, Some(old))],
            ..Touched::default()
        }
    };
    // The holder renews its own live lease.
    let renewed = Lease {
        until_ms: now + 1_200,
        ..worker
    };
    let touched = granted(&mut world, worker, renewed);
    clean(&mut world, touched);
    // A fence claims a lease that ran out.
    let fence = Lease {
        holder: ActorId::RECONCILER,
        ..renewed
    };
    let expired = Lease {
        until_ms: now,
        ..worker
    };
    let touched = granted(&mut world, expired, fence);
    clean(&mut world, touched);
    // A fence claims a live one; so does a restarted worker.
    let touched = granted(&mut world, worker, fence);
    fires(&mut world, touched, "lease-never-taken-live");
    let restarted = Lease {
        incarnation: 1,
        ..renewed
    };
    let touched = granted(&mut world, worker, restarted);
    fires(&mut world, touched, "lease-never-taken-live");
}

#[test]
fn fires_lease_never_taken_live_on_an_inbox_row() {
    let mut world = happy();
    let message = inbox_row(&world).message;
    let now = world.now;
    let lease = |index: u16, incarnation: u32, until_ms: u64| InboxLease {
        holder: ActorId::new(ActorKind::Worker, index),
        incarnation,
        until_ms,
    };
    let live = lease(0, 1, now + 500);
    let leased = |world: &mut World, old, new| {
        world.db.inbox.get_mut(message).expect("the row").lease = Some(new);
        Touched {
            inbox_leases: vec![(message, old)],
            ..Touched::default()
        }
    };
    // A first lease, its holder's renewal, and a takeover of one that ran
    // out are fine.
    let touched = leased(&mut world, None, live);
    clean(&mut world, touched);
    let touched = leased(&mut world, Some(live), lease(0, 1, now + 900));
    clean(&mut world, touched);
    let expired = lease(0, 1, now);
    let touched = leased(&mut world, Some(expired), lease(1, 1, now + 900));
    clean(&mut world, touched);
    // Another worker, or the holder's next incarnation, takes a live one.
    let touched = leased(&mut world, Some(live), lease(1, 1, now + 900));
    fires(&mut world, touched, "lease-never-taken-live");
    let touched = leased(&mut world, Some(live), lease(0, 2, now + 900));
    fires(&mut world, touched, "lease-never-taken-live");
}

#[test]
fn fires_lease_never_taken_live_on_an_outbox_claim() {
    let mut world = happy();
    let message = *world
        .db
        .task(TASK)
        .outbox_rows
        .first()
        .expect("an outbox row");
    assert!(world.db.find_outbox(message).is_some());
    let now = world.now;
    let term = world.config.publish_lease_ms;
    let publisher = |index: u16| ActorId::new(ActorKind::Publisher, index);
    let live = (publisher(0), 1, now + 500);
    // `writer` (incarnation 1) wrote `new` over `old`.
    let wrote = |world: &mut World, old, new: Option<(ActorId, u32, u64)>, writer| {
        world.db.outbox_row_mut(message).lease = new;
        Touched {
            claims: vec![ClaimWrite {
                message,
                replaced: old,
                writer,
                incarnation: 1,
            }],
            ..Touched::default()
        }
    };
    // A first claim for the whole term, its holder's release, and a
    // claim over one that ran out are fine.
    let touched = wrote(
        &mut world,
        None,
        Some((publisher(0), 1, now + term)),
        publisher(0),
    );
    clean(&mut world, touched);
    let touched = wrote(&mut world, Some(live), None, publisher(0));
    clean(&mut world, touched);
    let expired = (publisher(0), 1, now);
    let claim = Some((publisher(1), 1, now + 900));
    let touched = wrote(&mut world, Some(expired), claim, publisher(1));
    clean(&mut world, touched);
    // Another publisher takes a live claim, or releases one; the holder's
    // next incarnation takes it.
    let touched = wrote(&mut world, Some(live), claim, publisher(1));
    fires(&mut world, touched, "lease-never-taken-live");
    let touched = wrote(&mut world, Some(live), None, publisher(1));
    fires(&mut world, touched, "lease-never-taken-live");
    let restarted = Some((publisher(0), 2, now + 900));
    let mut touched = wrote(&mut world, Some(live), restarted, publisher(0));
    touched.claims[0].incarnation = 2;
    fires(&mut world, touched, "lease-never-taken-live");
    // A claim longer than its term.
    let long = Some((publisher(0), 1, now + term + 1));
    let touched = wrote(&mut world, None, long, publisher(0));
    fires(&mut world, touched, "lease-bounded");
}

#[test]
fn a_publisher_reports_the_claims_it_writes() {
    // The happy path's publisher claims task-1's work row: the step says
    // so, with the claim it replaced (none), so the checks above judge it.
    let world = stepped_until(&happy_path_with(""), |world| {
        !world.touched.claims.is_empty()
    });
    let claim = world.touched.claims[0];
    assert_eq!(claim.writer, ActorId::new(ActorKind::Publisher, 0));
    assert_eq!(claim.replaced, None);
    let row = world.db.outbox_row(claim.message);
    assert_eq!(row.lease.map(|(holder, ..)| holder), Some(claim.writer));
}

#[test]
fn fires_lease_bounded() {
    // A task's lease: its full term is fine, a millisecond more is not.
    let mut world = stepped_until(&happy_path_with(""), task_running);
    let now = world.now;
    let lease = world.db.task(TASK).lease.expect("a running task's lease");
    let term = world.config.task_lease_ms;
    let granted = |world: &mut World, until_ms: u64| {
        world.db.set_lease(TASK, Some(Lease { until_ms, ..lease }));
        Touched {
            leases: vec![(TASK, Some(lease))],
            ..Touched::default()
        }
    };
    let touched = granted(&mut world, now + term);
    clean(&mut world, touched);
    let touched = granted(&mut world, now + term + 1);
    fires(&mut world, touched, "lease-bounded");
    // An inbox row's processing lease, likewise.
    let mut world = happy();
    let message = inbox_row(&world).message;
    let now = world.now;
    let term = world.config.inbox_lease_ms;
    let leased = |world: &mut World, until: u64| {
        let holder = ActorId::new(ActorKind::Worker, 0);
        world.db.inbox.get_mut(message).expect("the row").lease = Some(InboxLease {
            holder,
            incarnation: 1,
            until_ms: until,
        });
        Touched {
            inbox_leases: vec![(message, None)],
            ..Touched::default()
        }
    };
    let touched = leased(&mut world, now + term);
    clean(&mut world, touched);
    let touched = leased(&mut world, now + term + 1);
    fires(&mut world, touched, "lease-bounded");
}

#[test]
fn fires_review_stops_automation() {
    let mut world = stepped_until(&happy_path_with(""), task_running);
    let lease = world.db.task(TASK).lease.expect("a running task's lease");
    let claimed = |world: &mut World| {
        world.db.set_lease(
            TASK,
            Some(Lease {
                holder: ActorId::RECONCILER,
                ..lease
            }),
        );
        Touched {
            leases: vec![(
                TASK,
                Some(Lease {
                    until_ms: 0,
                    ..lease
                }),
            )],
            ..Touched::default()
        }
    };
    // A fence claims an expired attempt: its job.
    let touched = claimed(&mut world);
    clean(&mut world.clone(), touched);
    // The same claim on a task whose effect waits for a human.
    let now = world.now;
    world.db.review(
        Some(TASK),
        ReviewReason::StoreCannotConfirm,
        "token".to_string(),
        now,
    );
    let touched = claimed(&mut world);
    fires(&mut world, touched, "review-stops-automation");
}

/// Marks `world`'s last step as one `actor` took: the checks that ask who
/// wrote something read the step's record.
fn as_step_of(world: &mut World, actor: ActorId) {
    let mut record = world.trace.last().expect("a step").clone();
    record.actor = actor;
    world.trace.push(&record);
}

#[test]
fn fires_effect_outcome_final() {
    let touched = || tasks(&[TASK]);
    let worker = |index| ActorId::new(ActorKind::Worker, index);
    // `token`'s row of `world` rewritten by a step of `writer`: only
    // workers and the reconciler (fences run on both) write ledger rows,
    // so only their steps are judged.
    let written = |world: &World, token, writer, write: &dyn Fn(&mut LedgerRow)| {
        let mut world = world.clone();
        write(world.db.task_mut(TASK).effect_mut(token).expect("the row"));
        as_step_of(&mut world, writer);
        world
    };
    let fence = ActorId::new(ActorKind::Reconciler, 0);
    let with_state =
        |world: &World, state| written(world, artifact_token(), fence, &|row| row.state = state);
    // task-1's artifact row is verified, and the checker saw it settle.
    let verified = happy();
    let row = verified
        .db
        .task(TASK)
        .effect(artifact_token())
        .expect("row");
    assert_eq!(row.state, EffectState::Verified);
    clean(&mut with_state(&verified, EffectState::Verified), touched());
    // (Which settled outcome may follow which is unit-tested beside the
    // check: a compensated row here would break compensation-recorded
    // first, the store still showing the artifact.)
    // A writer that skipped the guard for open rows: reopened, or
    // settled another way.
    for state in [
        EffectState::Unknown,
        EffectState::Started,
        EffectState::CompensationRequired,
        EffectState::Failed,
    ] {
        fires(
            &mut with_state(&verified, state),
            touched(),
            "effect-outcome-final",
        );
    }
    // A row a fence claimed is the fence's to settle; a worker runs fences
    // too, so only a write by another worker is the stale holder's.
    let claimed_by = |fence: u16, writer: u16| {
        written(&verified, artifact_token(), worker(writer), &|row| {
            row.state = EffectState::CompensationRequired;
            row.fenced_by = Some(worker(fence));
        })
        .check_as_touched(touched())
        .expect("a settled row changed")
    };
    let stale = claimed_by(0, 1);
    assert_eq!(stale.invariant, "effect-outcome-final");
    assert!(stale.message.contains("while worker-1 had claimed it"));
    let own = claimed_by(0, 0);
    assert_eq!(own.invariant, "effect-outcome-final");
    assert!(
        own.message.contains("was settled verified"),
        "{}",
        own.message
    );
    // An open row a fence claimed, settled by another worker: the stale
    // holder the fence was sent to stop; by the claim's own worker, fine.
    let compensation = Token {
        kind: EffectKind::Compensation,
        ..artifact_token()
    };
    let mut open = verified.clone();
    open.db.task_mut(TASK).effects.push(LedgerRow {
        token: compensation,
        state: EffectState::Started,
        request_sha256: [0; 32],
        observed_sha256: None,
        error_code: None,
        fenced_by: Some(worker(0)),
    });
    clean(&mut open, touched());
    let settled_by = |writer: u16| {
        written(&open, compensation, worker(writer), &|row| {
            row.state = EffectState::Failed;
        })
    };
    let violation = settled_by(1)
        .check_as_touched(touched())
        .expect("settled by a stale worker");
    assert_eq!(violation.invariant, "effect-outcome-final");
    assert!(violation.message.contains("while worker-1 had claimed it"));
    clean(&mut settled_by(0), touched());
    // The reconciler's fences too: settling a row a worker's fence claimed
    // after its own claim (fuzz seed 31 of 10^7 steps) is the stale one's
    // write; a row its own claim names is its to settle.
    let by_reconciler = |claimed: ActorId| {
        let mut world = open.clone();
        let row = world
            .db
            .task_mut(TASK)
            .effect_mut(compensation)
            .expect("the row");
        row.fenced_by = Some(claimed);
        clean(&mut world, touched());
        written(&world, compensation, fence, &|row| {
            row.state = EffectState::Compensated
        })
    };
    let violation = by_reconciler(worker(1))
        .check_as_touched(touched())
        .expect("settled by a stale reconciler");
    assert_eq!(violation.invariant, "effect-outcome-final");
    assert!(
        violation.message.contains("reconciler settled")
            && violation.message.contains("while worker-2 had claimed it"),
        "{}",
        violation.message
    );
    clean(&mut by_reconciler(fence), touched());
}

#[test]
fn fires_running_task_leased() {
    let mut world = stepped_until(&happy_path_with(""), task_running);
    let lease = world.db.task(TASK).lease.expect("a running task's lease");
    let dropped = || Touched {
        leases: vec![(TASK, Some(lease))],
        ..Touched::default()
    };
    // The lease of a task that stopped running goes with it.
    let mut ended = world.clone();
    ended.db.task_mut(TASK).state.status = Status::Completed;
    ended.db.set_lease(TASK, None);
    clean(&mut ended, dropped());
    // Dropped while the task runs: nobody would fence it.
    world.db.set_lease(TASK, None);
    fires(&mut world.clone(), dropped(), "running-task-leased");
    // Dropped because a human owns the task: automation leaves it alone.
    let now = world.now;
    world.db.review(
        Some(TASK),
        ReviewReason::EventIdPayloadConflict,
        "task-1:TaskStarted:1".to_string(),
        now,
    );
    clean(&mut world, dropped());
}

#[test]
fn fires_lease_on_live_attempt() {
    let mut world = stepped_until(&happy_path_with(""), task_running);
    let lease = world.db.task(TASK).lease.expect("a running task's lease");
    assert_eq!(lease.attempt, 1);
    let granted = |world: &mut World, new: Lease| {
        world.db.set_lease(TASK, Some(new));
        Touched {
            leases: vec![(TASK, Some(lease))],
            ..Touched::default()
        }
    };
    let renewed = Lease {
        until_ms: world.now + world.config.task_lease_ms,
        ..lease
    };
    let touched = granted(&mut world, renewed);
    clean(&mut world, touched);
    // A lease on an attempt the task is not on (a stale holder's).
    let stale = Lease {
        attempt: 2,
        ..renewed
    };
    let touched = granted(&mut world, stale);
    fires(&mut world, touched, "lease-on-live-attempt");
    // A lease on a task that has ended.
    let mut ended = happy();
    let touched = granted(&mut ended, renewed);
    fires(&mut ended, touched, "lease-on-live-attempt");
}

/// A step in which the append API refused an outside `event` with
/// `answer`, the refusal recorded as the store records it.
fn refused_append(world: &mut World, event: &TaskEvent, answer: &'static str) -> Touched {
    let task = TaskId::parse(&event.task_id).expect("a task id");
    world.db.reject(Rejection {
        step: world.steps,
        task,
        event_id: event.event_id.clone(),
        payload_sha256: event_payload_sha256(event),
        event_type: event.event_type().as_str(),
        reason: answer,
        actor: ActorId::new(ActorKind::Operator, 0),
    });
    appended(event, answer)
}

/// A step in which the append API answered `answer` to an outside `event`.
fn appended(event: &TaskEvent, answer: &'static str) -> Touched {
    Touched {
        appends: vec![(event.clone(), answer)],
        ..Touched::default()
    }
}

#[test]
fn fires_append_answered_truly() {
    let mut world = happy();
    let started = TaskEvent::clone(&world.db.task(TASK).events[0].event);
    assert!(matches!(
        started.body,
        EventBody::TaskStarted { attempt: 1, .. }
    ));
    let lie = |world: &mut World, event: &TaskEvent, answer: &'static str| {
        fires(world, appended(event, answer), "append-answered-truly");
    };
    // The stored event again: a duplicate (or the step that committed it).
    for answer in ["duplicate", "committed"] {
        clean(&mut world, appended(&started, answer));
    }
    // Another payload under its id: a conflict, never a duplicate.
    let altered = started.altered();
    let touched = refused_append(&mut world, &altered, "EVENT_ID_PAYLOAD_CONFLICT");
    clean(&mut world, touched);
    lie(&mut world, &altered, "duplicate");
    lie(&mut world, &started, "EVENT_ID_PAYLOAD_CONFLICT");
    // A stored id is never refused as if it were new.
    lie(&mut world, &started, "ILLEGAL_TRANSITION");
    // A new id: refused by the state machine or by its semantic key, never
    // a duplicate, a conflict, or committed without being stored.
    let fresh = TaskEvent {
        event_id: Text::from("outside-1"),
        ..started.clone()
    };
    for answer in ["ILLEGAL_TRANSITION", "SEMANTIC_KEY_CONFLICT"] {
        let touched = refused_append(&mut world, &fresh, answer);
        clean(&mut world, touched);
    }
    // A refusal nobody recorded.
    fires(
        &mut happy(),
        appended(&fresh, "ILLEGAL_TRANSITION"),
        "rejection-names-its-reason",
    );
    for answer in ["duplicate", "EVENT_ID_PAYLOAD_CONFLICT", "committed"] {
        lie(&mut world, &fresh, answer);
    }
    // The semantic key is (type, attempt): attempt 7 was never started.
    let seventh = TaskEvent {
        body: match started.body.clone() {
            EventBody::TaskStarted {
                worker_id,
                lease_until_epoch_ms,
                ..
            } => EventBody::TaskStarted {
                attempt: 7,
                worker_id,
                lease_until_epoch_ms,
            },
            _ => unreachable!("checked above"),
        },
        ..fresh.clone()
    };
    let touched = refused_append(&mut world, &seventh, "ILLEGAL_TRANSITION");
    clean(&mut world, touched);
    lie(&mut world, &seventh, "SEMANTIC_KEY_CONFLICT");
    // A task that does not exist, and one that does.
    let elsewhere = TaskEvent {
        task_id: Text::from("task-99"),
        ..fresh.clone()
    };
    clean(&mut world, appended(&elsewhere, "TASK_NOT_FOUND"));
    lie(&mut world, &elsewhere, "duplicate");
    lie(&mut world, &fresh, "TASK_NOT_FOUND");
}

#[test]
fn fires_cancel_acknowledged_durable() {
    let mut world = drained(&load_scenario("cancel-complete-race-cancel-wins"));
    let (task, signal) = world
        .db
        .tasks
        .iter()
        .find_map(|row| {
            row.events
                .iter()
                .find_map(|stored| match &stored.event.body {
                    EventBody::CancellationRequested { signal_id, .. } => {
                        Some((row.id, SignalId::parse(signal_id).expect("a sig-N id")))
                    }
                    _ => None,
                })
        })
        .expect("the scenario cancels a task");
    let answered = |task: TaskId, signal: SignalId, acknowledged: bool| Touched {
        cancels: vec![(task, signal, acknowledged)],
        ..Touched::default()
    };
    // The recorded cancel acknowledged (a retry finds it); another refused.
    let other = SignalId(signal.0 + 100);
    clean(&mut world, answered(task, signal, true));
    clean(&mut world, answered(task, other, false));
    // A second cancel with its own signal, acknowledged as if the first
    // one's request were its own; a retry of the recorded one refused.
    fires(
        &mut world,
        answered(task, other, true),
        "cancel-acknowledged-durable",
    );
    fires(
        &mut world,
        answered(task, signal, false),
        "cancel-acknowledged-durable",
    );
}

#[test]
fn fires_commit_respects_live_lease() {
    let mut world = happy();
    let worker = ActorId::new(ActorKind::Worker, 0);
    let now = world.now;
    let lease = Lease {
        attempt: 1,
        holder: worker,
        incarnation: 1,
        until_ms: now + 100,
    };
    let committed = |kind: EventType, lease: Option<Lease>| Touched {
        commits: vec![Commit {
            task: TASK,
            kind,
            attempt: 1,
            actor: worker,
            incarnation: 1,
            lease,
        }],
        ..Touched::default()
    };
    // Under its own lease, live or run out; under another's that ran out
    // (at this very millisecond, too), or none; and a start, which takes it.
    let others = Lease {
        holder: ActorId::RECONCILER,
        ..lease
    };
    let ran_out = |lease: Lease| Lease {
        until_ms: now,
        ..lease
    };
    for held in [
        Some(lease),
        Some(ran_out(lease)),
        Some(ran_out(others)),
        None,
    ] {
        clean(&mut world, committed(EventType::TaskCompleted, held));
    }
    // A start ends no attempt (what it names is start-names-its-holder's).
    let start = fired(&mut world, committed(EventType::TaskStarted, Some(others)));
    assert_ne!(start, Some("commit-respects-live-lease"));
    world.violation = None;
    // Under another holder's live lease, or another incarnation's.
    let restarted = Lease {
        incarnation: 2,
        ..lease
    };
    for held in [others, restarted] {
        fires(
            &mut world,
            committed(EventType::TaskCompleted, Some(held)),
            "commit-respects-live-lease",
        );
    }
    for kind in [
        EventType::AttemptFailed,
        EventType::TaskFailed,
        EventType::TaskCancelled,
    ] {
        fires(
            &mut world,
            committed(kind, Some(others)),
            "commit-respects-live-lease",
        );
    }
}

/// Inserts a copy of `task-1`'s outbox row `of` under a new id, as a
/// re-drive would write one; `kind` renames a work row's event type.
fn redriven(world: &mut World, of: OutboxId, kind: Option<&'static str>) {
    let mut row = world.db.find_outbox(of).expect("the row").clone();
    row.id = world.db.next_outbox_id();
    row.published_ms = None;
    if let Some(kind) = kind {
        row.event_type = kind;
    }
    world.db.insert_outbox(row);
}

#[test]
fn fires_within_budgets() {
    let mut world = happy();
    // task-1 ran attempt 1, with nothing re-driven.
    world.config.attempts_max = 1;
    world.config.redrive_max = 1;
    clean(&mut world, tasks(&[TASK]));
    // One re-drive of its work and one of its events are within budget;
    // a second of either is not.
    redriven(&mut world, OutboxId(1), Some("TaskRedriven"));
    redriven(&mut world, OutboxId(2), None);
    clean(&mut world, tasks(&[TASK]));
    let mut work = world.clone();
    redriven(&mut work, OutboxId(1), Some("TaskRedriven"));
    fires(&mut work, tasks(&[TASK]), "within-budgets");
    redriven(&mut world, OutboxId(2), None);
    fires(&mut world, tasks(&[TASK]), "within-budgets");
    // An attempt past attempts_max.
    let mut world = happy();
    world.config.attempts_max = 0;
    fires(&mut world, tasks(&[TASK]), "within-budgets");
    // A retry's work row ready before its back-off has passed.
    let mut world = happy();
    world.config.retry_backoff_ms = 500;
    let retry = |world: &World, wait: u64| {
        let mut world = world.clone();
        redriven(&mut world, OutboxId(1), Some("TaskRetryScheduled"));
        let row = world.db.outbox_rows().last().expect("the retry").id;
        let created = world.db.find_outbox(row).expect("the row").created_ms;
        world.db.outbox_row_mut(row).ready_ms = created + wait;
        world
    };
    clean(&mut retry(&world, 500), tasks(&[TASK]));
    fires(&mut retry(&world, 499), tasks(&[TASK]), "within-budgets");
    // A task a fuzz world failed for spent attempts, at its last attempt:
    // with one attempt more allowed, it failed too early.
    let (mut world, exhausted) = (1..=40)
        .find_map(|seed| {
            let (_, mut world, _) = sim::fuzz::campaign::fuzz_world(seed, 10_000, None);
            while world.steps < 10_000 && world.step() == Stepped::Step {
                let failed = world.db.tasks.iter().find(|row| {
                    row.state.terminal_error_code.as_deref() == Some("ATTEMPTS_EXHAUSTED")
                });
                if let Some(row) = failed {
                    let id = row.id;
                    return Some((world, id));
                }
            }
            None
        })
        .expect("a fuzz world exhausts some task's attempts");
    clean(&mut world, tasks(&[exhausted]));
    world.config.attempts_max += 1;
    fires(&mut world, tasks(&[exhausted]), "within-budgets");
}

/// A step of `actor` with `verb` and `outcome` appended to the trace, and
/// the checks run on it with nothing else touched.
fn store_step(
    world: &mut World,
    actor: ActorId,
    verb: Verb,
    outcome: &'static str,
) -> Option<&'static str> {
    let mut record = world.trace.last().expect("a step").clone();
    record.step += 1;
    record.actor = actor;
    record.verb = verb;
    record.outcome = outcome;
    world.trace.push(&record);
    fired(world, Touched::default())
}

/// `store_step`, which must find nothing.
fn within(world: &mut World, actor: ActorId, verb: Verb, outcome: &'static str) {
    let found = store_step(world, actor, verb, outcome);
    assert_eq!(found, None, "{actor} {verb:?} {outcome}");
}

#[test]
fn fires_within_budgets_on_store_calls() {
    let worker = ActorId::new(ActorKind::Worker, 0);
    let reconciler = ActorId::new(ActorKind::Reconciler, 0);
    let mut world = happy();
    world.config.store_calls_max = 2;
    // Per kind, two calls in one delivery are within budget, a third is
    // not: puts, hides, reads that timed out.
    for (verb, outcome) in [
        (Verb::Put, "ok"),
        (Verb::Compensate, "timeout"),
        (Verb::ReadBack, "timeout"),
    ] {
        let mut world = world.clone();
        within(&mut world, worker, Verb::Register, "ok");
        for _ in 0..2 {
            within(&mut world, worker, verb, outcome);
            // Steps that made no call of that kind count nothing.
            within(&mut world, worker, Verb::ReadBack, "absent");
            within(&mut world, worker, Verb::Put, "lease-lost");
        }
        let third = store_step(&mut world, worker, verb, outcome);
        assert_eq!(third, Some("within-budgets"), "{verb:?}");
    }
    // The count is per delivery: a new one, an ack or a crash starts
    // again. And per holder: another worker's reads are its own.
    for boundary in [Verb::Register, Verb::Nack, Verb::Crash] {
        let mut world = world.clone();
        for _ in 0..2 {
            within(&mut world, worker, Verb::CheckHidden, "timeout");
        }
        let other = ActorId::new(ActorKind::Worker, 1);
        within(&mut world, other, Verb::ReadBack, "timeout");
        within(&mut world, worker, boundary, "ok");
        for _ in 0..2 {
            within(&mut world, worker, Verb::CheckHidden, "timeout");
        }
    }
    // A fence's calls are counted from its claim, on any holder.
    within(&mut world, reconciler, Verb::FenceClaim, "ok");
    for outcome in ["timeout", "tombstoned"] {
        within(&mut world, reconciler, Verb::FenceHide, outcome);
    }
    let mut again = world.clone();
    within(&mut again, reconciler, Verb::FenceClaim, "ok");
    within(&mut again, reconciler, Verb::FenceHide, "hidden");
    let third = store_step(&mut world, reconciler, Verb::FenceHide, "hidden");
    assert_eq!(third, Some("within-budgets"));
    // A step already counted is not counted again when checked again.
    let mut world = happy();
    world.config.store_calls_max = 1;
    within(&mut world, worker, Verb::FenceRead, "timeout");
    clean(&mut world, Touched::default());
    assert_eq!(
        store_step(&mut world, worker, Verb::FenceCheck, "timeout"),
        Some("within-budgets")
    );
}

/// A worker step about task-1, as `store_step` makes them.
fn worker_step(world: &mut World, verb: Verb, outcome: &'static str) -> Option<&'static str> {
    let mut record = world.trace.last().expect("a step").clone();
    record.step += 1;
    record.actor = ActorId::new(ActorKind::Worker, 0);
    record.verb = verb;
    record.outcome = outcome;
    record.task = Some(TASK);
    record.attempt = 1;
    world.trace.push(&record);
    fired(world, Touched::default())
}

#[test]
fn fires_poison_judged_by_its_handler() {
    const FIRES: Option<&str> = Some("poison-judged-by-its-handler");
    // Running its first attempt: a delivery may resume it.
    let mut world = stepped_until(&happy_path_with(""), task_running);
    assert_eq!(world.handler_version, 1);
    let legacy = |world: &mut World| {
        let input = &world.db.task(TASK).input;
        let needs_two = Input::canonical(input.canonical.clone(), input.valid, 2);
        world.db.task_mut(TASK).input = needs_two;
    };
    // task-1's input needs handler 1: a transform under 1 plans it, and
    // failing it as poison is wrong, by a start or by a resume.
    for transform in [
        (Verb::Start, "committed"),
        (Verb::Register, "resume"),
        (Verb::Reload, "resume"),
    ] {
        let mut world = world.clone();
        assert_eq!(worker_step(&mut world, Verb::Register, "ok"), None);
        assert_eq!(worker_step(&mut world, transform.0, transform.1), None);
        assert_eq!(worker_step(&mut world, Verb::Plan, "started"), None);
        assert_eq!(
            worker_step(&mut world, Verb::FailPoison, "committed"),
            FIRES
        );
    }
    // A legacy input needs handler 2: under 1 it is poison, and planning
    // it is wrong, even when the handler is bumped after the transform.
    legacy(&mut world);
    let mut under_one = world.clone();
    assert_eq!(worker_step(&mut under_one, Verb::Register, "ok"), None);
    assert_eq!(worker_step(&mut under_one, Verb::Start, "committed"), None);
    under_one.handler_version = 2;
    assert_eq!(
        worker_step(&mut under_one, Verb::FailPoison, "committed"),
        None
    );
    assert_eq!(worker_step(&mut under_one, Verb::Plan, "started"), FIRES);
    // Under 2 it is worked, not poison.
    world.handler_version = 2;
    assert_eq!(worker_step(&mut world, Verb::Register, "ok"), None);
    assert_eq!(worker_step(&mut world, Verb::Register, "resume"), None);
    assert_eq!(worker_step(&mut world, Verb::Plan, "started"), None);
    let mut poison = world.clone();
    assert_eq!(
        worker_step(&mut poison, Verb::FailPoison, "duplicate"),
        FIRES
    );
    // A new delivery forgets the transform: a plan needs its own.
    assert_eq!(worker_step(&mut world, Verb::Register, "ok"), None);
    assert_eq!(worker_step(&mut world, Verb::Plan, "started"), FIRES);
}

#[test]
fn fires_delivery_acts_on_status() {
    const FIRES: Option<&str> = Some("delivery-acts-on-status");
    // task-1 runs attempt 1: a delivery of it resumes, by its inbox step or
    // a reload, and never fences it as if cancelling.
    let running = stepped_until(&happy_path_with(""), task_running);
    for verb in [Verb::Register, Verb::Reload] {
        let mut world = running.clone();
        assert_eq!(worker_step(&mut world, verb, "resume"), None);
        assert_eq!(worker_step(&mut world, verb, "cancelling"), FIRES);
    }
    // Cancelling: the other way round.
    let mut cancelling = running.clone();
    cancelling.db.task_mut(TASK).state.status = Status::Cancelling;
    assert_eq!(
        worker_step(&mut cancelling.clone(), Verb::Register, "cancelling"),
        None
    );
    assert_eq!(worker_step(&mut cancelling, Verb::Reload, "resume"), FIRES);
    // Another attempt than the one the task runs, or a task that ended.
    let mut moved_on = running.clone();
    moved_on.db.task_mut(TASK).state.attempt = 2;
    assert_eq!(worker_step(&mut moved_on, Verb::Register, "resume"), FIRES);
    assert_eq!(worker_step(&mut happy(), Verb::Register, "resume"), FIRES);
    // Other outcomes of the same steps are judged elsewhere.
    assert_eq!(
        worker_step(&mut happy(), Verb::Register, "superseded"),
        None
    );
}

/// The reconciler re-drives only letters whose cause may pass by itself.
#[test]
fn fires_redrive_only_transient() {
    let scenario = crate::common::load_scenario("poison-message");
    let mut world = crate::common::run_clean(&scenario).world;
    let letter = world.broker.dead_letters[0].clone();
    let redriven = |id| Touched {
        redriven: vec![id],
        ..Touched::default()
    };
    // Its code says the input needs a newer handler: poison.
    fires(&mut world, redriven(letter.id), "redrive-only-transient");
    // A re-drive writes the letter's work again, for the same attempt, as
    // its task's newest outbox row.
    let resend = |world: &mut World, attempt: u32| {
        use sim::world::stores::db::Payload;
        let mut row = world
            .db
            .find_outbox(letter.message)
            .expect("the work row")
            .clone();
        if let Payload::Work { attempt: sent, .. } = &mut row.payload {
            *sent = attempt;
        }
        row.id = world.db.next_outbox_id();
        world.db.task_mut(letter.task).outbox_rows.push(row.id);
        world.db.insert_outbox(row);
    };
    resend(&mut world, 1);
    for code in [
        "DELIVERY_ATTEMPTS_EXHAUSTED",
        "STORE_UNAVAILABLE",
        "LEASE_HELD",
    ] {
        world.broker.dead_letters[0].error_code = code;
        clean(&mut world, redriven(letter.id));
    }
    // The flag the broker keeps is not what judges: the code is.
    world.broker.dead_letters[0].error_code = letter.error_code;
    world.broker.dead_letters[0].transient = true;
    fires(&mut world, redriven(letter.id), "redrive-only-transient");
    let unknown = sim::world::engine::ids::DeadLetterId(99);
    fires(&mut world, redriven(unknown), "redrive-only-transient");
    // A transient letter re-driven as work for another attempt.
    world.broker.dead_letters[0].error_code = "STORE_UNAVAILABLE";
    clean(&mut world, redriven(letter.id));
    resend(&mut world, 2);
    fires(&mut world, redriven(letter.id), "redrive-only-transient");
}

/// A client sends one request at most `client_attempts_max` times, and
/// gives up only after the last of them.
#[test]
fn fires_within_budgets_for_a_client_request() {
    use sim::world::engine::ids::RequestId;
    let mut world = happy();
    world.config.client_attempts_max = 3;
    let request = RequestId(77);
    let send = |gave_up| Touched {
        client_sends: vec![(request, gave_up)],
        ..Touched::default()
    };
    for _ in 0..3 {
        clean(&mut world, send(false));
    }
    let mut fourth = world.clone();
    fires(&mut fourth, send(false), "within-budgets");
    // Giving up after the third send is right, and forgets the request.
    clean(&mut world.clone(), send(true));
    // Giving up after two is not.
    let mut early = happy();
    early.config.client_attempts_max = 3;
    clean(&mut early, send(false));
    clean(&mut early, send(false));
    fires(&mut early, send(true), "within-budgets");
}

#[test]
fn fires_lifecycle_legal() {
    // task-1 running attempt 1 at v1; one event appended by hand, with the
    // state row moved on as the event says.
    let appended = |body: EventBody, status: Status| {
        let mut world = stepped_until(&happy_path_with(""), task_running);
        let row = &mut world.db.tasks[TASK.slot()];
        let mut stored = row.events[0].clone();
        // Kept for the attempt it speaks for, as the store keeps events.
        stored.attempt = body.attempt().unwrap_or(row.state.attempt);
        let event = TaskEvent {
            event_id: Text::from("task-1:by-hand"),
            sequence: 2,
            body,
            ..TaskEvent::clone(&stored.event)
        };
        stored.payload_sha256 = event_payload_sha256(&event);
        stored.event = Arc::new(event);
        row.events.push(stored);
        row.state.version = 2;
        row.state.status = status;
        world
    };
    let completed = |attempt| EventBody::TaskCompleted {
        attempt,
        artifact_sha256: Text::from("by-hand"),
        artifact_verified: true,
    };
    // The table's row (the state row differs from the fold, which another
    // invariant judges), then a completion of an attempt never started, an
    // unverified one, and a confirmation of a cancellation never asked.
    let mut world = appended(completed(1), Status::Completed);
    assert_ne!(fired(&mut world, tasks(&[TASK])), Some("lifecycle-legal"));
    let mut world = appended(completed(2), Status::Completed);
    fires(&mut world, tasks(&[TASK]), "lifecycle-legal");
    let unverified = EventBody::TaskCompleted {
        attempt: 1,
        artifact_sha256: Text::from("by-hand"),
        artifact_verified: false,
    };
    let mut world = appended(unverified, Status::Completed);
    fires(&mut world, tasks(&[TASK]), "lifecycle-legal");
    let confirmed = EventBody::TaskCancelled {
        stopped_at_sequence: 1,
        effects_reconciled: true,
    };
    let mut world = appended(confirmed, Status::Cancelled);
    fires(&mut world, tasks(&[TASK]), "lifecycle-legal");
}

#[test]
fn fires_inbox_result_truthful() {
    use sim::world::stores::db::{InboxState, ProcessResult};
    // task-1's work message registered, not yet finalized; the task's
    // state row is then set by hand to what became of attempt 1.
    let processing = stepped_until(&happy_path_with(""), |world| {
        world
            .db
            .inbox
            .get(OutboxId(1))
            .is_some_and(|row| row.state == InboxState::Processing)
    });
    let finalized = |status: Status, result: ProcessResult| {
        let mut world = processing.clone();
        let state = &mut world.db.task_mut(TASK).state;
        state.status = status;
        state.attempt = 1;
        let row = world.db.inbox.get_mut(OutboxId(1)).expect("the row");
        row.state = InboxState::Completed;
        row.result = Some(result);
        let touched = Touched {
            inbox: vec![OutboxId(1)],
            ..Touched::default()
        };
        (world, touched)
    };
    let completed = |attempt| ProcessResult::Completed {
        task: TASK,
        attempt,
    };
    let superseded = ProcessResult::Superseded { task: TASK };
    let failed = ProcessResult::Failed {
        task: TASK,
        code: "TASK_FAILED",
    };
    // What became of attempt 1: completed, failed, or moved past (queued
    // for a retry after it).
    for (status, result) in [
        (Status::Completed, completed(1)),
        (Status::Queued, superseded),
        (Status::Failed, failed),
    ] {
        let (mut world, touched) = finalized(status, result);
        clean(&mut world, touched);
    }
    let cancelled = ProcessResult::Cancelled { task: TASK };
    {
        let (mut world, touched) = finalized(Status::Cancelled, cancelled);
        clean(&mut world, touched);
    }
    // Completed under another attempt, or while the task runs; failed
    // while it completed; superseded when its own attempt completed or
    // still runs (or is being cancelled), or when the task was cancelled.
    for (status, result) in [
        (Status::Completed, completed(2)),
        (Status::Running, completed(1)),
        (Status::Completed, failed),
        (Status::Completed, superseded),
        (Status::Running, superseded),
        (Status::Cancelling, superseded),
        (Status::Cancelled, superseded),
    ] {
        let (mut world, touched) = finalized(status, result);
        fires(&mut world, touched, "inbox-result-truthful");
    }
}

#[test]
fn fires_snapshot_report_truthful() {
    use sim::world::stores::db::SnapshotReport;
    // task-1 with its first snapshot written (one every event).
    let written = stepped_until(&happy_path_with("snapshot_every = 1\n"), |world| {
        world
            .db
            .find_task(TASK)
            .is_some_and(|row| !row.snapshots.is_empty())
    });
    let through = written.db.task(TASK).snapshots[0].through_sequence;
    // The world with the snapshot damaged by `damage`, and a report of it
    // under `reason`, as a rebuild would leave it.
    let reported = |damage: &dyn Fn(&mut sim::world::stores::db::Snapshot), reason| {
        let mut world = written.clone();
        damage(&mut world.db.task_mut(TASK).snapshots[0]);
        world.db.snapshot_reports.push(SnapshotReport {
            task: TASK,
            through_sequence: through,
            reason,
            step: world.steps,
        });
        let touched = Touched {
            projection: vec![TASK],
            ..Touched::default()
        };
        (world, touched)
    };
    let sound = |_: &mut sim::world::stores::db::Snapshot| {};
    let stale_hash = |snapshot: &mut sim::world::stores::db::Snapshot| {
        snapshot.state.attempt += 1;
    };
    let rehashed = |snapshot: &mut sim::world::stores::db::Snapshot| {
        snapshot.state.attempt += 1;
        snapshot.state_sha256 = sim::task::json::state_sha256(&snapshot.state);
    };
    // Each damage under the reason that names it passes; any other report
    // of it, or any report of a sound snapshot, fires.
    for (damage, earned) in [
        (&sound as &dyn Fn(&mut _), None),
        (&stale_hash, Some("SNAPSHOT_HASH_MISMATCH")),
        (&rehashed, Some("SNAPSHOT_MISMATCH")),
    ] {
        for reason in [
            "SNAPSHOT_HASH_MISMATCH",
            "SNAPSHOT_MISMATCH",
            "SNAPSHOT_LOST",
        ] {
            let (mut world, touched) = reported(damage, reason);
            if Some(reason) == earned {
                clean(&mut world, touched);
            } else {
                fires(&mut world, touched, "snapshot-report-truthful");
            }
        }
    }
    // A report of a version the task has no snapshot at.
    let (mut world, touched) = reported(&sound, "SNAPSHOT_MISMATCH");
    world
        .db
        .snapshot_reports
        .last_mut()
        .expect("pushed")
        .through_sequence = through + 7;
    fires(&mut world, touched, "snapshot-report-truthful");
}

/// `converges` holds retention to happening: a settled task whose record
/// expired is compacted, and no record outlives its due tick.
#[test]
fn converges_fires_when_retention_does_not_happen() {
    let world = happy();
    assert_eq!(world.convergence_failures(), Vec::<String>::new());
    let key = world.db.task(TASK).key.clone();

    // The record expired and the settled task was left whole.
    let mut world = happy();
    world.db.remove_record(&key);
    let failures = world.convergence_failures();
    assert_eq!(
        failures,
        vec!["task-1 settled, its idempotency record expired, but never compacted".to_string()]
    );
    // Under review, its rows wait for the human who settles it.
    review_artifact(&mut world);
    assert_eq!(world.convergence_failures(), Vec::<String>::new());

    // A record kept past the tick it was due at; due within the last
    // reconcile period, it is still on time.
    let mut world = happy();
    let period = world.config.reconcile_every_ms;
    world.now += 10 * period;
    let now = world.now;
    world.db.retain_until(now - period, key.clone());
    assert_eq!(world.convergence_failures(), Vec::<String>::new());
    world.db.retain_until(now - period - 1, key);
    let failures = world.convergence_failures();
    assert!(
        failures
            .iter()
            .any(|f| f.contains("was due to expire at") && f.contains("is still kept at")),
        "converges: {failures:?}"
    );
    // A reconciler that restarted as the run went quiet: its housekeeping
    // wake, due now, resumes the retention (fuzz seed 7584).
    world.housekeeping(now);
    assert_eq!(world.convergence_failures(), Vec::<String>::new());

    // A compaction leaves none of the task's rows: one that kept an
    // outbox row, or an inbox row, of task-1 did not.
    let mut world = happy();
    let outbox = world.db.task(TASK).outbox_rows.clone();
    let outbox_row = world.db.find_outbox(outbox[0]).expect("a row").clone();
    let (message, inbox_row) = world
        .db
        .inbox
        .iter()
        .find(|(message, _)| outbox.contains(message))
        .map(|(message, row)| (message, row.clone()))
        .expect("task-1's work was registered in the inbox");
    assert!(world.compact_task(TASK));
    assert_eq!(world.convergence_failures(), Vec::<String>::new());
    let mut kept_outbox = world.clone();
    let mut outbox_row = outbox_row;
    outbox_row.id = kept_outbox.db.next_outbox_id();
    kept_outbox.db.insert_outbox(outbox_row);
    assert_eq!(
        kept_outbox.convergence_failures(),
        vec!["1 outbox row(s) of compacted tasks are still kept".to_string()]
    );
    world.db.inbox.insert(message, inbox_row);
    assert_eq!(
        world.convergence_failures(),
        vec!["1 inbox row(s) of compacted tasks are still kept".to_string()]
    );
}

/// `converges` asks that no idempotency record stay parked for a task that
/// has ended: the terminal event files a parked record again, and nothing
/// else ever would.
#[test]
fn converges_fires_when_a_record_stays_parked_after_its_task_ended() {
    let mut world = happy();
    assert_eq!(world.convergence_failures(), Vec::<String>::new());
    world.db.task_mut(TASK).retention_parked = true;
    assert_eq!(
        world.convergence_failures(),
        vec![
            "task-1 is completed and its idempotency record is still parked until it ends"
                .to_string()
        ]
    );
}

/// `converges` asks that every idempotency record be on its way out: in
/// the retention index, parked on a task that works, or kept for a review.
/// A record that fell out of all three (a terminal event that cleared the
/// parked flag without filing the record again) never expires.
#[test]
fn converges_fires_when_a_record_is_on_no_way_out() {
    let mut world = happy();
    assert_eq!(world.convergence_failures(), Vec::<String>::new());
    let key = world.db.task(TASK).key.clone();
    let filed: Vec<(u64, Text)> = world
        .db
        .retention_index
        .iter()
        .filter(|(_, filed)| *filed == key)
        .cloned()
        .collect();
    assert_eq!(filed.len(), 1, "the happy path files task-1's record once");
    world.db.retention_index.remove(&filed[0]);
    let failures = world.convergence_failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0].starts_with(&format!("the idempotency record of {key} (committed at "))
            && failures[0].ends_with("it never expires"),
        "{failures:?}"
    );
    // Parked on a task that still works, it waits for that task's end.
    world.db.task_mut(TASK).state.status = Status::Running;
    world.db.task_mut(TASK).retention_parked = true;
    assert!(
        !world
            .convergence_failures()
            .iter()
            .any(|failure| failure.ends_with("it never expires")),
        "{:?}",
        world.convergence_failures()
    );
}

#[test]
fn fires_semantic_key_unique() {
    // The completion restated under a new id at the next sequence, the
    // version moved with it: the same fact (TaskCompleted, attempt 1) twice.
    let mut world = happy();
    clean(&mut world, tasks(&[TASK]));
    let row = world.db.task_mut(TASK);
    let mut again = row.events.last().expect("events").clone();
    let event = Arc::make_mut(&mut again.event);
    event.event_id = Text::from("task-1:TaskCompleted:1:restated");
    event.sequence += 1;
    row.state.version = event.sequence;
    again.payload_sha256 = event_payload_sha256(&again.event);
    row.events.push(again);
    fires(&mut world, tasks(&[TASK]), "semantic-key-unique");
    // An event kept for another attempt than it speaks for: later appends
    // would be judged against the wrong fact.
    let mut world = stepped_until(&happy_path_with(""), task_running);
    let row = world.db.task_mut(TASK);
    assert_eq!(row.events[0].attempt, 1);
    let mut completion = row.events[0].clone();
    let event = TaskEvent {
        event_id: Text::from("task-1:TaskCompleted:1"),
        sequence: 2,
        body: EventBody::TaskCompleted {
            attempt: 1,
            artifact_sha256: Text::from("by-hand"),
            artifact_verified: true,
        },
        ..TaskEvent::clone(&completion.event)
    };
    completion.payload_sha256 = event_payload_sha256(&event);
    completion.event = Arc::new(event);
    row.events.push(completion);
    row.state.version = 2;
    row.state.status = Status::Completed;
    let mut kept_right = world.clone();
    assert_ne!(
        fired(&mut kept_right, tasks(&[TASK])),
        Some("semantic-key-unique")
    );
    let row = world.db.task_mut(TASK);
    row.events.last_mut().expect("the completion").attempt = 0;
    fires(&mut world, tasks(&[TASK]), "semantic-key-unique");
}

#[test]
fn fires_let_go_for_a_reason() {
    // task-1's attempt 1 planned: its artifact row started, its lease held.
    let planned = stepped_until(&happy_path_with(""), |world| {
        world
            .db
            .find_task(TASK)
            .is_some_and(|row| row.effect(artifact_token()).is_some())
    });
    let lease = planned
        .db
        .task(TASK)
        .lease
        .expect("the worker holds the lease");
    let let_go = |why| Touched {
        let_go: vec![sim::world::LetGo {
            task: TASK,
            attempt: 1,
            token: artifact_token(),
            actor: lease.holder,
            incarnation: lease.incarnation,
            why,
        }],
        ..Touched::default()
    };
    let with_row = |state: EffectState, fenced: bool| {
        let mut world = planned.clone();
        let row = world
            .db
            .task_mut(TASK)
            .effect_mut(artifact_token())
            .expect("row");
        row.state = state;
        row.fenced_by = fenced.then_some(ActorId::RECONCILER);
        world
    };
    // Fenced: only once its own attempt's effect is.
    fires(
        &mut with_row(EffectState::Started, false),
        let_go("fenced"),
        "let-go-for-a-reason",
    );
    clean(&mut with_row(EffectState::Started, true), let_go("fenced"));
    clean(
        &mut with_row(EffectState::Compensated, false),
        let_go("fenced"),
    );
    // Not verified: only while it is not.
    clean(
        &mut with_row(EffectState::Started, false),
        let_go("not-verified"),
    );
    fires(
        &mut with_row(EffectState::Verified, false),
        let_go("not-verified"),
        "let-go-for-a-reason",
    );
    // Lease lost: only once the lease is not its own, live.
    let mut world = planned.clone();
    fires(&mut world, let_go("lease-lost"), "let-go-for-a-reason");
    let mut world = planned.clone();
    world.db.task_mut(TASK).lease = None;
    clean(&mut world, let_go("lease-lost"));
}

#[test]
fn fires_payload_hash_canonical() {
    // A fourth event, stored under a new id at the next sequence. With the
    // hash its canonical JSON has, the rehash agrees and the next check
    // finds the state row not moved; with another hash, the rehash fires.
    let appended_with = |hash: Option<[u8; 32]>| {
        let mut world = happy();
        clean(&mut world, tasks(&[TASK]));
        let row = world.db.task_mut(TASK);
        let mut next = row.events.last().expect("events").clone();
        let event = Arc::make_mut(&mut next.event);
        event.event_id = Text::from("task-1:TaskCompleted:1:again");
        event.sequence = 3;
        next.payload_sha256 = hash.unwrap_or_else(|| event_payload_sha256(event));
        row.events.push(next);
        fired(&mut world, tasks(&[TASK]))
    };
    assert_eq!(appended_with(None), Some("version-step-one"));
    assert_eq!(appended_with(Some([7; 32])), Some("payload-hash-canonical"));
}

#[test]
fn fires_snapshot_report_truthful_when_a_rebuild_passes_a_snapshot_unreported() {
    // The projector, restarted, rebuilds task-1 past its snapshot at v2,
    // whose hash does not check, and reports it.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scenarios/snapshot-corruption.toml"
    );
    let scenario =
        sim::scenario::parse::load(std::path::Path::new(path)).expect("the scenario loads");
    let rebuilt = |world: &World| {
        world.trace.last().is_some_and(|record| {
            record.verb == sim::world::engine::step::Verb::Rebuild && record.task == Some(TASK)
        })
    };
    let mut world = stepped_until(&scenario, rebuilt);
    let touched = || Touched {
        projection: vec![TASK],
        ..Touched::default()
    };
    clean(&mut world.clone(), touched());
    // The same rebuild past one more damaged snapshot, newer, that nobody
    // reported.
    let mut unreported = world.db.task(TASK).snapshots[0].clone();
    unreported.through_sequence += 10;
    world.db.task_mut(TASK).snapshots.push(unreported);
    fires(&mut world, touched(), "snapshot-report-truthful");
}

#[test]
fn fires_own_commands_legal() {
    let refused_by = |world: &mut World, task: TaskId, actor: ActorId, reason: &'static str| {
        let event = TaskEvent::clone(&world.db.task(TASK).events[1].event);
        world.db.reject(Rejection {
            step: world.steps,
            task,
            event_id: event.event_id.clone(),
            payload_sha256: event_payload_sha256(&event),
            event_type: event.event_type().as_str(),
            reason,
            actor,
        });
        // The refusal list is read whatever the step touched; task-1 is
        // clean.
        fired(world, tasks(&[TASK]))
    };
    let worker = ActorId::new(ActorKind::Worker, 0);
    // An outside producer's event refused as terminal is no fault of the
    // pipeline's; a worker's or a fence's own is.
    let mut world = happy();
    let operator = ActorId::new(ActorKind::Operator, 0);
    assert_eq!(
        refused_by(&mut world, TASK, operator, "TERMINAL_STATE"),
        None
    );
    for actor in [worker, ActorId::RECONCILER] {
        let mut world = happy();
        assert_eq!(
            refused_by(&mut world, TASK, actor, "TERMINAL_STATE"),
            Some("own-commands-legal")
        );
    }
    // The one refusal the lesson plans for: a completion meeting a pending
    // cancellation under cancel-wins (a second task, not touched, holds
    // the request).
    let mut world = happy();
    world.config.cancel_policy = Policy::CancelWins;
    let asked = insert_task(&mut world, "second-key");
    world.db.task_mut(asked).state.cancellation_signal_id = Some(Text::from("signal-1"));
    let mut refused = world.clone();
    assert_eq!(
        refused_by(&mut refused, asked, worker, "CANCELLATION_PENDING"),
        None
    );
    assert_eq!(
        refused_by(&mut world, asked, worker, "ILLEGAL_TRANSITION"),
        Some("own-commands-legal")
    );
}

#[test]
fn fires_rejection_names_its_reason() {
    let rejected_as = |world: &mut World, task: TaskId, reason: &'static str, event: &TaskEvent| {
        world.db.reject(Rejection {
            step: world.steps,
            task,
            event_id: event.event_id.clone(),
            payload_sha256: event_payload_sha256(event),
            event_type: event.event_type().as_str(),
            reason,
            actor: ActorId::new(ActorKind::Operator, 0),
        });
        // The rejection check reads the database's list, whatever the
        // step touched; task-1 is clean.
        fired(world, tasks(&[TASK]))
    };
    let outside = |world: &World| TaskEvent {
        event_id: Text::from("outside-1"),
        ..TaskEvent::clone(&world.db.task(TASK).events[0].event)
    };
    let rejected = |world: &mut World, task: TaskId, reason: &'static str| {
        let event = outside(world);
        rejected_as(world, task, reason, &event)
    };
    // The completed task refuses a late start as terminal: a lesson code.
    let mut world = happy();
    clean(&mut world, tasks(&[TASK]));
    assert_eq!(rejected(&mut world, TASK, "TERMINAL_STATE"), None);
    assert_eq!(rejected(&mut world, TASK, "SEMANTIC_KEY_CONFLICT"), None);
    // A code no lesson defines, and a blank one.
    for code in ["xyzzy", ""] {
        let mut world = happy();
        assert_eq!(
            rejected(&mut world, TASK, code),
            Some("rejection-names-its-reason")
        );
    }
    // TERMINAL_STATE for a task still queued.
    let mut world = happy();
    let queued = insert_task(&mut world, "second-key");
    assert_eq!(
        rejected(&mut world, queued, "TERMINAL_STATE"),
        Some("rejection-names-its-reason")
    );
    // A copy of a stored event refused as a history or payload conflict;
    // another event under a stored id is one.
    let mut world = happy();
    let stored = TaskEvent::clone(&world.db.task(TASK).events[1].event);
    for reason in ["HISTORY_CONFLICT", "EVENT_ID_PAYLOAD_CONFLICT"] {
        let mut world = world.clone();
        assert_eq!(
            rejected_as(&mut world, TASK, reason, &stored),
            Some("rejection-names-its-reason")
        );
    }
    assert_eq!(
        rejected_as(
            &mut world,
            TASK,
            "EVENT_ID_PAYLOAD_CONFLICT",
            &stored.altered()
        ),
        None
    );
    // CANCELLATION_PENDING: only under cancel-wins, for a task someone
    // asked to cancel.
    let mut world = happy();
    world.config.cancel_policy = Policy::CancelWins;
    assert_eq!(
        rejected(&mut world, TASK, "CANCELLATION_PENDING"),
        Some("rejection-names-its-reason"),
        "nobody asked to cancel the task"
    );
    // (A second task, not touched, holds the request: the step's checks
    // judge task-1.)
    let mut world = happy();
    world.config.cancel_policy = Policy::CancelWins;
    let asked = insert_task(&mut world, "second-key");
    world.db.task_mut(asked).state.cancellation_signal_id = Some(Text::from("signal-1"));
    assert_eq!(rejected(&mut world, asked, "CANCELLATION_PENDING"), None);
    world.config.cancel_policy = Policy::CompletionWins;
    assert_eq!(
        rejected(&mut world, asked, "CANCELLATION_PENDING"),
        Some("rejection-names-its-reason"),
        "completion-wins refuses no event for a pending cancellation"
    );
    // An outside append refused under a code no lesson defines.
    let mut world = happy();
    let started = TaskEvent::clone(&world.db.task(TASK).events[0].event);
    let fresh = TaskEvent {
        event_id: Text::from("outside-1"),
        ..started
    };
    let touched = refused_append(&mut world, &fresh, "ILLEGAL_TRANSITION");
    clean(&mut world, touched);
    fires(
        &mut world,
        appended(&fresh, "xyzzy"),
        "rejection-names-its-reason",
    );
}

#[test]
fn fires_replay_follows_its_reference() {
    use sim::world::engine::ids::DeadLetterId;
    use sim::world::input::DeadLetterRef;
    let scenario = crate::common::load_scenario("poison-message");
    let mut world = crate::common::run_clean(&scenario).world;
    let letter = world.broker.dead_letters[0].clone();
    let replay = |reference: DeadLetterRef, found: Option<DeadLetterId>| Touched {
        replays: vec![(reference, found)],
        ..Touched::default()
    };
    // Each form of reference names the poison message's letter.
    for reference in [
        DeadLetterRef::Id(letter.id),
        DeadLetterRef::Message(letter.message),
        DeadLetterRef::Task(letter.task),
    ] {
        clean(&mut world, replay(reference.clone(), Some(letter.id)));
        fires(
            &mut world,
            replay(reference, None),
            "replay-follows-its-reference",
        );
    }
    // A task with no dead letter: found is a lie, none is the truth.
    let other = insert_task(&mut world, "no-letter-here");
    clean(&mut world, replay(DeadLetterRef::Task(other), None));
    fires(
        &mut world,
        replay(DeadLetterRef::Task(other), Some(letter.id)),
        "replay-follows-its-reference",
    );
}

#[test]
fn fires_compaction_keeps_objects() {
    // A real compaction archives task-1's artifact: the store answers for
    // its token as it did before.
    let mut world = happy();
    assert!(world.compact_task(TASK), "the settled task is compacted");
    assert!(world.db.task(TASK).compacted);
    clean(&mut world, Touched::default());
    // Noted as a compaction notes it, then the object comes back hidden
    // (it stays live, nothing was archived: the live-object check fires
    // first; the answer comparison is what the absent case below reaches).
    let noted = || {
        let mut world = happy();
        let World {
            checker, db, store, ..
        } = &mut world;
        checker.note_compaction(db, store, TASK, None);
        world
    };
    let mut world = noted();
    the_artifact(&mut world).hidden = true;
    fires(&mut world, Touched::default(), "compaction-keeps-objects");
    // Unchanged, but left among the live objects: the archive holds no
    // copy to answer for it.
    let mut world = noted();
    let violation = world
        .check_as_touched(Touched::default())
        .expect("a live object of a compacted task");
    assert_eq!(violation.invariant, "compaction-keeps-objects");
    assert!(violation.message.contains("still among the live ones"));
    // Dropped instead of archived: the store now answers absent.
    let mut world = noted();
    assert!(world.store.remove(artifact_token()).is_some());
    let violation = world
        .check_as_touched(Touched::default())
        .expect("a compacted artifact lost");
    assert_eq!(violation.invariant, "compaction-keeps-objects");
    assert!(violation.message.contains("now answers Absent"));
}

#[test]
fn fires_review_earned() {
    // task-1's attempt 1 planned and running: its artifact row started, on
    // a store that cannot be queried (only there can an effect stay
    // unconfirmable).
    let planned = stepped_until(
        &happy_path_with("store_supports_query = false\n"),
        |world| {
            world
                .db
                .find_task(TASK)
                .is_some_and(|row| row.effect(artifact_token()).is_some())
        },
    );
    assert_eq!(planned.db.task(TASK).state.status, Status::Running);
    let reviewed = || Touched {
        reviews: vec![artifact_token()],
        ..Touched::default()
    };
    let with_row = |state: EffectState, status: Status| {
        let mut world = planned.clone();
        world
            .db
            .task_mut(TASK)
            .effect_mut(artifact_token())
            .expect("row")
            .state = state;
        world.db.task_mut(TASK).state.status = status;
        world
    };
    // Nothing the ledger can settle: review is the honest answer.
    for state in [EffectState::Started, EffectState::Unknown] {
        clean(&mut with_row(state, Status::Running), reviewed());
    }
    // A cancel may refuse to use what the ledger verified (cancel-wins).
    clean(
        &mut with_row(EffectState::Verified, Status::Cancelling),
        reviewed(),
    );
    // A retry that had a verified row to use sent it to review instead.
    fires(
        &mut with_row(EffectState::Verified, Status::Running),
        reviewed(),
        "review-earned",
    );
    // A store that answers queries could have been read back.
    let mut world = with_row(EffectState::Unknown, Status::Running);
    world.config.store_supports_query = true;
    fires(&mut world, reviewed(), "review-earned");
}

/// A dead letter sent to review: earned once its task spent the re-drive
/// budget of the letter's topic, not before.
#[test]
fn fires_review_earned_for_a_dead_letter() {
    let scenario = crate::common::load_scenario("poison-message");
    let mut world = crate::common::run_clean(&scenario).world;
    let letter = world.broker.dead_letters[0].clone();
    let reviewed = || Touched {
        dead_letter_reviews: vec![letter.id],
        ..Touched::default()
    };
    // The budget is counted from the task's re-drive rows (none here), not
    // from the reconciler's counters, which may say anything.
    assert!(
        !world.db.task(letter.task).compacted,
        "the task keeps its rows"
    );
    world.config.redrive_max = 0;
    world.db.task_mut(letter.task).redrives = 7;
    clean(&mut world, reviewed());
    world.config.redrive_max = 1;
    world.db.task_mut(letter.task).redrives = 1;
    world.db.task_mut(letter.task).event_redrives = 1;
    fires(&mut world, reviewed(), "review-earned");
}

#[test]
fn fires_mismatch_shows_damage() {
    // The store corrupted the first put; the task failed for it, and the
    // damaged version stays in the store, hidden.
    let mut world = drained(&corrupt_scenario());
    assert!(
        !world.db.task(TASK).compacted,
        "the failed task keeps its rows"
    );
    let touched = || Touched {
        tokens: vec![artifact_token()],
        ..Touched::default()
    };
    clean(&mut world, touched());
    // The same failure with the damaged version replaced by the one the
    // task's input makes: nothing shows the mismatch it failed for.
    let (sha, size) = world.expected_artifact(TASK);
    let good = sim::world::stores::store::Version::plain(TASK, 1, sha, size);
    the_artifact(&mut world).versions = vec![good];
    fires(&mut world, touched(), "mismatch-shows-damage");
}

#[test]
fn fires_mismatch_ends_task() {
    // The store corrupted the first put: the worker compensated the
    // artifact and failed the task for it, at that attempt.
    let mut world = drained(&corrupt_scenario());
    let ledger = world
        .db
        .task(TASK)
        .effect(artifact_token())
        .expect("the attempt's ledger row");
    assert_eq!(ledger.state, EffectState::Compensated);
    assert_eq!(ledger.error_code, Some("ARTIFACT_HASH_MISMATCH"));
    clean(&mut world, tasks(&[TASK]));
    // The ledger row of an attempt before the one the task ended at: the
    // task went on to another attempt after its artifact did not verify.
    let row = world.db.task_mut(TASK).effect_mut(artifact_token());
    row.expect("the row").token.attempt = 0;
    fires(&mut world, tasks(&[TASK]), "mismatch-ends-task");
    // A completed task whose attempt's ledger says its artifact did not
    // verify.
    let mut world = happy();
    let row = world.db.task_mut(TASK).effect_mut(artifact_token());
    let row = row.expect("the completed attempt's row");
    row.state = EffectState::Compensated;
    row.error_code = Some("ARTIFACT_HASH_MISMATCH");
    fires(&mut world, tasks(&[TASK]), "mismatch-ends-task");
}
